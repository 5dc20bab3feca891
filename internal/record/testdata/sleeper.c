/* Allocates, tells its watcher it is ready, sleeps, then allocates again
 * and leaves a mark: the test kills the recorder meanwhile and checks that
 * the program ran on unharmed. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void *volatile sink;

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	for (int i = 0; i < 100; i++)
		sink = malloc(64);
	printf("ready\n");
	fflush(stdout);
	sleep(1);
	/* Enough events to fill a ring many times over once nobody drains it. */
	for (int i = 0; i < 2000000; i++) {
		sink = malloc(32);
		free(sink);
	}
	FILE *f = fopen(argv[1], "w");
	if (f == NULL)
		return 3;
	fputs("finished\n", f);
	fclose(f);
	return 0;
}
