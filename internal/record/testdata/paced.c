/* paced.c: four allocations 60 ms apart, for the times of events. */
#include <stdlib.h>
#include <time.h>

int main(void)
{
	void *p[4];
	for (int i = 0; i < 4; i++) {
		if (i > 0) {
			struct timespec ts = {0, 60 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
		p[i] = malloc(100 + i);
	}
	for (int i = 0; i < 4; i++)
		free(p[i]);
	return 0;
}
