/*
 * threads.c: threads that allocate at once, each on its own. Every thread
 * runs the malloc-dense loop of dense.c on its own 1,024 slots: it frees a
 * random slot and fills it with a new block of 8 to 520 bytes. argv[1] is
 * the number of threads (default 8), argv[2] the iterations per thread
 * (default 1 million).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define SLOTS 1024

static long per_thread;

static void *worker(void *arg)
{
	void *slot[SLOTS] = {0};
	uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)((intptr_t)arg + 1);
	for (long i = 0; i < per_thread; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t s = (size_t)(x % SLOTS);
		free(slot[s]);
		slot[s] = malloc(8 + (size_t)((x >> 16) % 513));
	}
	for (int s = 0; s < SLOTS; s++)
		free(slot[s]);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 8;
	per_thread = argc > 2 ? atol(argv[2]) : 1000000;
	if (n < 1 || n > 1024 || per_thread < 0)
		return 2;
	pthread_t t[1024];
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) != 0)
			return 1;
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}
