/*
 * crossfree.c: threads that free each other's blocks. Thread i allocates
 * blocks of 16 to 272 bytes and hands them to thread i+1 through a ring;
 * it frees what thread i-1 hands it. argv[1] is the number of threads
 * (default 4), argv[2] the allocations per thread (default 2 million).
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

#define RING 1024

struct ring {
	_Alignas(64) void *slot[RING];
	_Alignas(64) uint64_t head; /* written by the producer */
	_Alignas(64) uint64_t tail; /* written by the consumer */
};

static struct ring *rings;
static int nthreads;
static long per_thread;

static void push(struct ring *r, void *p)
{
	uint64_t h = r->head;
	while (h - __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) == RING)
		sched_yield();
	r->slot[h % RING] = p;
	__atomic_store_n(&r->head, h + 1, __ATOMIC_RELEASE);
}

static void *pop(struct ring *r)
{
	uint64_t t = r->tail;
	if (__atomic_load_n(&r->head, __ATOMIC_ACQUIRE) == t)
		return NULL;
	void *p = r->slot[t % RING];
	__atomic_store_n(&r->tail, t + 1, __ATOMIC_RELEASE);
	return p;
}

static void *worker(void *arg)
{
	int me = (int)(intptr_t)arg;
	struct ring *out = &rings[(me + 1) % nthreads], *in = &rings[me];
	uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(me + 1);
	long freed = 0;
	for (long i = 0; i < per_thread; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		push(out, malloc(16 + (size_t)(x % 257)));
		void *p;
		while ((p = pop(in)) != NULL) {
			free(p);
			freed++;
		}
	}
	while (freed < per_thread) {
		void *p = pop(in);
		if (p == NULL) {
			sched_yield();
			continue;
		}
		free(p);
		freed++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	nthreads = argc > 1 ? atoi(argv[1]) : 4;
	per_thread = argc > 2 ? atol(argv[2]) : 2000000;
	if (nthreads < 2)
		nthreads = 2;
	rings = aligned_alloc(64, sizeof(struct ring) * (size_t)nthreads);
	for (int i = 0; i < nthreads; i++)
		rings[i].head = rings[i].tail = 0;
	pthread_t t[256];
	for (int i = 0; i < nthreads && i < 256; i++)
		pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
	for (int i = 0; i < nthreads && i < 256; i++)
		pthread_join(t[i], NULL);
	free(rings);
	return 0;
}
