/* Loads a plugin, allocates through it, unloads it, and does it again. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

void *volatile sink;

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	for (int round = 0; round < 2; round++) {
		void *h = dlopen(argv[1], RTLD_NOW);
		if (h == NULL) {
			fprintf(stderr, "%s\n", dlerror());
			return 1;
		}
		void *(*alloc)(size_t) = (void *(*)(size_t))dlsym(h, "plugin_alloc");
		sink = alloc(1000 + round);
		dlclose(h);
	}
	return 0;
}
