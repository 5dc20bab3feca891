/* Allocates at the bottom of a recursion 100 calls deep. */
#include <stdlib.h>

void *volatile sink;

__attribute__((noinline)) void descend(int depth)
{
	if (depth == 0) {
		sink = malloc(48);
		return;
	}
	descend(depth - 1);
	__asm__ volatile("" ::: "memory"); /* no tail call */
}

int main(void)
{
	descend(100);
	free(sink);
	return 0;
}
