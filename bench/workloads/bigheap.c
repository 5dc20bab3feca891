/*
 * bigheap.c: a big heap of small blocks, the kind servers and compilers
 * hold. Allocates argv[1] blocks (default 10 million) of 16 to 64 bytes,
 * the sizes cycling deterministically, frees every other one, and exits
 * with half of them still live (and reachable from the array).
 */
#include <stdio.h>
#include <stdlib.h>

/*
 * Global and not static: the compiler keeps a static it sees no later
 * reader of in a register, and the live blocks would be leaks, not still
 * reachable, at the leak scan at exit.
 */
void **blocks;

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10000000;
	if (n < 1) {
		fprintf(stderr, "bigheap: block count %s: need at least 1\n", argv[1]);
		return 2;
	}
	blocks = malloc((size_t)n * sizeof *blocks);
	if (!blocks) {
		fprintf(stderr, "bigheap: no memory for %ld block pointers\n", n);
		return 1;
	}
	for (long i = 0; i < n; i++) {
		/* 16, 24, ..., 64 bytes: seven sizes, so neighbours differ. */
		blocks[i] = malloc(16 + (size_t)((i * 5) % 7) * 8);
		if (!blocks[i]) {
			fprintf(stderr, "bigheap: out of memory after %ld blocks\n", i);
			return 1;
		}
	}
	for (long i = 0; i < n; i += 2) {
		free(blocks[i]);
		blocks[i] = NULL;
	}
	printf("%ld live blocks\n", n - (n + 1) / 2);
	return 0;
}
