/* A process that allocates, then replaces itself with another program. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *volatile sink;

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "child") == 0) {
		sink = malloc(555);
		return 5;
	}
	sink = malloc(111);
	execl("/proc/self/exe", argv[0], "child", (char *)NULL);
	return 99;
}
