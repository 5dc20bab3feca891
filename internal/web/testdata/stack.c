/* stack.c: a program whose stack grows and shrinks: five phases, 5 ms
 * apart, recurse 4, 16, 48, 16 and 4 levels deep, each level with 1 KiB
 * of locals, and allocate one level above the deepest, so that the
 * deepest point is a function entry. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *keep[64];
static int kept;

static int descend(int depth)
{
	volatile char frame[1024];
	memset((char *)frame, depth, sizeof frame);
	if (depth == 0)
		return frame[0];
	if (depth == 1) {
		free(keep[kept % 64]);
		keep[kept++ % 64] = malloc(100);
	}
	return descend(depth - 1) + frame[1];
}

int main(void)
{
	int depths[] = {4, 16, 48, 16, 4};
	for (int i = 0; i < 5; i++) {
		for (int j = 0; j < 5; j++)
			descend(depths[i]);
		usleep(5000);
	}
	return 0;
}
