/* churn.c: many allocations from a few call stacks, one block in 64 kept
 * to the end and never freed, and a line on stdout: a trace of some size
 * for the tests that cut or damage one, and a program with output of its
 * own. The first argument is the number of allocations (default 100000). */
#include <stdio.h>
#include <stdlib.h>

static void *kept[1 << 16];

void *make_small(int i) { return malloc(16 + i % 64); }
void *make_large(int i) { return malloc(4096 + i % 512); }

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100000, nkept = 0;
	for (int i = 0; i < n; i++) {
		void *p = i % 8 ? make_small(i) : make_large(i);
		if (i % 64 == 0 && nkept < (int)(sizeof kept / sizeof kept[0]))
			kept[nkept++] = p;
		else
			free(p);
	}
	printf("churn: %d allocations, %d kept\n", n, nkept);
	return 0;
}
