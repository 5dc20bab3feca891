/*
 * bigexit.c: holds 512 MiB of touched memory and waits to be killed, so
 * that its exit takes a while to give the memory back: between losing
 * its memory and becoming a zombie, it is a process on its way out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
	size_t n = 512u << 20;
	char *p = malloc(n);
	if (!p) {
		fprintf(stderr, "bigexit: no memory\n");
		return 1;
	}
	memset(p, 1, n);
	printf("%p\n", (void *)p);
	fflush(stdout);
	for (;;)
		pause();
}
