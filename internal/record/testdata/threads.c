/* Threads that resize their blocks and free each other's. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

#define THREADS 4

static void *volatile mailbox[THREADS];
static pthread_barrier_t barrier;
static int rounds = 20000;

static void *worker(void *arg)
{
	int me = (int)(intptr_t)arg;
	int next = (me + 1) % THREADS;
	for (int r = 0; r < rounds; r++) {
		/* Hand a block to the next thread; free what the previous one sent. */
		void *mine = malloc(16 + (r % 100));
		/* Grow it: sometimes in place, sometimes moved, while other
		 * threads allocate and free. */
		mine = realloc(mine, 16 + (r % 100) + (r % 7) * 40);
		while (__atomic_load_n(&mailbox[next], __ATOMIC_ACQUIRE) != NULL)
			sched_yield();
		__atomic_store_n(&mailbox[next], mine, __ATOMIC_RELEASE);
		void *got;
		while ((got = __atomic_exchange_n(&mailbox[me], NULL, __ATOMIC_ACQ_REL)) == NULL)
			sched_yield();
		free(got);
	}
	pthread_barrier_wait(&barrier);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		rounds = atoi(argv[1]);
	pthread_t t[THREADS];
	pthread_barrier_init(&barrier, NULL, THREADS);
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&barrier);
	return 0;
}
