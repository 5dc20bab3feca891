/* Many unpredictable events, to fill a small disk: random blocks of 8 to
 * 520 bytes freed in random order among 4,096 slots. */
#include <stdint.h>
#include <stdlib.h>

static void *slots[4096];

int main(void)
{
	uint64_t x = 88172645463325252ULL;
	for (int i = 0; i < 2000000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		free(slots[x % 4096]);
		slots[x % 4096] = malloc(8 + (size_t)((x >> 20) % 513));
	}
	return 0;
}
