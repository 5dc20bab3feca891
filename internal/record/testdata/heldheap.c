/*
 * heldheap.c: a heap held still for a leak scan from a test, without the
 * recorder. argv: how (bigheap, list, mixed), a block count, a seed, and
 * a file where the live blocks go, in 64-bit words: how many roots, the
 * values of the globals that keep blocks (the roots), and the live blocks
 * as pairs of address and size, as the recorder's live set would hold
 * them. Once the file is written it prints "ready" and waits for its
 * stdin to close.
 *
 *   bigheap  bench's bigheap: count blocks of 16 to 64 bytes, every other
 *            one freed, the rest kept by a global array.
 *   list     count blocks of 16 to 64 bytes, each linked to the next in
 *            random order of address from a global head: a scan follows
 *            it a block at a time.
 *   mixed    count blocks with random pointers to each other's starts
 *            and interiors, some kept by globals, some by a block of
 *            roots, the others lost: every class, many times.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void **blocks;
void *head;
void *roots[8];

static unsigned long long state;
static unsigned long next(void)
{
	state = state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned long)(state >> 33);
}

static size_t *sizes;

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: heldheap bigheap|list|mixed count seed file\n");
		return 2;
	}
	const char *how = argv[1];
	long n = atol(argv[2]);
	state = strtoull(argv[3], NULL, 10);
	if (n < 2) {
		fprintf(stderr, "heldheap: count %s: need at least 2\n", argv[2]);
		return 2;
	}
	blocks = malloc((size_t)n * sizeof *blocks);
	sizes = malloc((size_t)n * sizeof *sizes);
	if (!blocks || !sizes)
		return 1;
	for (long i = 0; i < n; i++) {
		sizes[i] = 16 + (size_t)((i * 5) % 7) * 8;
		if (strcmp(how, "bigheap") != 0)
			sizes[i] = 16 + next() % 7 * 8;
		blocks[i] = calloc(1, sizes[i]);
		if (!blocks[i])
			return 1;
	}
	if (strcmp(how, "bigheap") == 0) {
		for (long i = 0; i < n; i += 2) {
			free(blocks[i]);
			blocks[i] = NULL;
		}
	} else if (strcmp(how, "list") == 0) {
		for (long i = n - 1; i > 0; i--) {
			long j = (long)(next() % (unsigned long)(i + 1));
			void *t = blocks[i];
			size_t s = sizes[i];
			blocks[i] = blocks[j], sizes[i] = sizes[j];
			blocks[j] = t, sizes[j] = s;
		}
		for (long i = 0; i + 1 < n; i++)
			*(void **)blocks[i] = blocks[i + 1];
		head = blocks[0];
	} else if (strcmp(how, "mixed") == 0) {
		for (long i = 0; i < n; i++) {
			size_t words = sizes[i] / 8;
			for (size_t w = 0; w < words; w++) {
				if (next() % 4 != 0)
					continue;
				char *to = blocks[next() % (unsigned long)n];
				/* 8 bytes in, to a block whose first word is 0 or a
				 * pointer: no heuristic takes it for a start pointer. */
				((void **)blocks[i])[w] = to + (next() % 5 == 0 ? 8 : 0);
			}
		}
		for (int r = 0; r < 8; r++)
			roots[r] = (char *)blocks[next() % (unsigned long)n] + (r % 3 == 0 ? 8 : 0);
	} else {
		fprintf(stderr, "heldheap: %s: not bigheap, list nor mixed\n", how);
		return 2;
	}
	FILE *f = fopen(argv[4], "w");
	if (!f)
		return 1;
	uint64_t nroots = strcmp(how, "mixed") == 0 ? 8 : 1;
	fwrite(&nroots, sizeof nroots, 1, f);
	if (strcmp(how, "mixed") == 0)
		fwrite(roots, sizeof roots, 1, f);
	else {
		uint64_t root = strcmp(how, "list") == 0 ? (uintptr_t)head : (uintptr_t)blocks;
		fwrite(&root, sizeof root, 1, f);
	}
	for (long i = 0; i < n; i++) {
		if (blocks[i]) {
			uint64_t rec[2] = {(uintptr_t)blocks[i], sizes[i]};
			fwrite(rec, sizeof rec, 1, f);
		}
	}
	if (strcmp(how, "bigheap") == 0) {
		uint64_t rec[2] = {(uintptr_t)blocks, (uint64_t)n * sizeof *blocks};
		fwrite(rec, sizeof rec, 1, f);
	} else {
		/* Only the globals keep blocks now. */
		free(blocks);
		blocks = NULL;
	}
	if (fclose(f) != 0)
		return 1;
	free(sizes);
	printf("ready\n");
	fflush(stdout);
	char buf[1];
	while (read(0, buf, 1) > 0)
		;
	return 0;
}
