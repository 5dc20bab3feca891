/* Loads the plugin argv[1] names and allocates through it, keeping it
 * loaded until the end. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

void *volatile sink;

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	void *h = dlopen(argv[1], RTLD_NOW);
	if (h == NULL) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	void *(*alloc)(size_t) = (void *(*)(size_t))dlsym(h, "plugin_alloc");
	sink = alloc(1000);
	return 0;
}
