/* Allocates 1000 bytes three times at the bottom of a recursion 300 calls
 * deep (305 frames with main and libc's), and 1000 bytes in main; all four
 * blocks are live at the peak. */
#include <stdlib.h>

void *volatile sinks[4];

__attribute__((noinline)) void descend(int depth, int i)
{
	if (depth == 0) {
		sinks[i] = malloc(1000);
		return;
	}
	descend(depth - 1, i);
	__asm__ volatile("" ::: "memory"); /* no tail call */
}

int main(void)
{
	sinks[3] = malloc(1000);
	for (int i = 0; i < 3; i++)
		descend(300, i);
	return 0;
}
