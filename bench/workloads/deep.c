/* The unwinder's worst case: allocations alternate between the bottoms of
 * two recursions argv[1] calls deep, so that no event's stack shares its
 * outer part with the one before and each is unwound whole. argv[2] pairs
 * of a free and a malloc on each side. */
#include <stdlib.h>

void *volatile sink;

__attribute__((noinline)) void left(int d)
{
	if (d == 0) {
		free(sink);
		sink = malloc(32);
		return;
	}
	left(d - 1);
	__asm__ volatile("" ::: "memory"); /* no tail call */
}

__attribute__((noinline)) void right(int d)
{
	if (d == 0) {
		free(sink);
		sink = malloc(48);
		return;
	}
	right(d - 1);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 300, n = argc > 2 ? atoi(argv[2]) : 100000;
	for (int i = 0; i < n; i++) {
		left(depth);
		right(depth);
	}
	return 0;
}
