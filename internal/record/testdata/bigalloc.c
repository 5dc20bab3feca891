/* Many events, to fill a small disk. */
#include <stdlib.h>

void *volatile sink;

int main(void)
{
	for (int i = 0; i < 3000000; i++) {
		sink = malloc((size_t)(i % 1000) + 1);
		free(sink);
	}
	return 0;
}
