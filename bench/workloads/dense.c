/*
 * dense.c: the malloc-dense loop. 4,096 slots; each step frees a random
 * slot and fills it with a new block of 8 to 520 bytes. argv[1] is the
 * number of allocations (default 16 million).
 */
#include <stdint.h>
#include <stdlib.h>

#define SLOTS 4096

static void *slots[SLOTS];

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 16000000;
	uint64_t x = 88172645463325252ULL;
	for (long i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		unsigned slot = (unsigned)(x % SLOTS);
		free(slots[slot]);
		slots[slot] = malloc(8 + (size_t)((x >> 20) % 513));
	}
	for (int i = 0; i < SLOTS; i++)
		free(slots[i]);
	return 0;
}
