/* zeroed.c: new blocks of every small size, and what realloc adds to a
 * block, carved from memory the program filled with a pattern and freed.
 * Under memtrail they must read as zero over all of their usable size,
 * and the pattern of the blocks beside them must be intact; natively they
 * hold the pattern. Prints the number of blocks checked, then the number
 * of nonzero bytes found in them and of guard bytes changed. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXSIZE 300

static long checked, stale, clobbered;

static void check_zero(const unsigned char *p, size_t from, size_t to)
{
	checked++;
	for (size_t i = from; i < to; i++)
		stale += p[i] != 0;
}

/* dirty leaves blocks of size n filled with 0xa5 in the allocator's free
 * lists, where the next allocations of that size come from. */
static void dirty(size_t n)
{
	void *p[4];
	for (int i = 0; i < 4; i++) {
		p[i] = malloc(n);
		memset(p[i], 0xa5, malloc_usable_size(p[i]));
	}
	for (int i = 3; i >= 0; i--)
		free(p[i]);
}

int main(void)
{
	unsigned char *guard[MAXSIZE + 1];
	for (size_t n = 1; n <= MAXSIZE; n++) {
		dirty(n);
		unsigned char *p = malloc(n);
		check_zero(p, 0, malloc_usable_size(p));
		/* A block carved after it: clearing p must not reach it. */
		guard[n] = malloc(n);
		memset(guard[n], 0x5a, malloc_usable_size(guard[n]));
		free(p);

		dirty(n);
		p = aligned_alloc(32, (n + 31) & ~(size_t)31);
		check_zero(p, 0, malloc_usable_size(p));
		free(p);

		/* Grown by realloc: the old block's words stay, what is added
		 * reads as zero. */
		p = malloc(n);
		size_t kept = malloc_usable_size(p);
		memset(p, 0x3c, kept);
		dirty(n + 40);
		p = realloc(p, n + 40);
		for (size_t i = 0; i < kept; i++)
			stale += p[i] != 0x3c;
		check_zero(p, kept, malloc_usable_size(p));
		free(p);
	}
	for (size_t n = 1; n <= MAXSIZE; n++) {
		for (size_t i = 0, u = malloc_usable_size(guard[n]); i < u; i++)
			clobbered += guard[n][i] != 0x5a;
		free(guard[n]);
	}
	printf("%ld %ld %ld\n", checked, stale, clobbered);
	return 0;
}
