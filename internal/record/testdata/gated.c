/* gated.c: allocates, says "ready <pid>", waits for a line on its stdin,
 * then allocates and frees enough to fill its ring many times over: a
 * recorder that stopped reading its ring would hold it up for good. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void *volatile sink;

int main(void)
{
	for (int i = 0; i < 100; i++)
		sink = malloc(64);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char line[16];
	if (fgets(line, sizeof line, stdin) == NULL)
		return 2;
	for (int i = 0; i < 200000; i++) {
		sink = malloc(32);
		free(sink);
	}
	return 0;
}
