/*
 * primitives.c: what the candidate ways to order and stamp an event cost
 * one thread, in ns each: an uncontended lock xadd (the agent's sequence
 * number), rdtsc, rdtscp, a store and a full fence, and the store, fence,
 * rdtscp and store that ordering by the time-stamp counter would take.
 * Build with cc -O2 primitives.c and run it: it prints one line each.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

static volatile uint64_t counter __attribute__((aligned(64)));
static volatile uint64_t flag __attribute__((aligned(64)));

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

#define N 50000000L
#define REPORT(name, t0) printf("%-36s %.2f ns\n", name, (now() - (t0)) / N * 1e9)

int main(void)
{
	uint64_t sum = 0;
	unsigned aux;
	double t0 = now();
	for (long i = 0; i < N; i++)
		sum += __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
	REPORT("lock xadd (uncontended)", t0);
	t0 = now();
	for (long i = 0; i < N; i++)
		sum += __rdtsc();
	REPORT("rdtsc", t0);
	t0 = now();
	for (long i = 0; i < N; i++)
		sum += __rdtscp(&aux);
	REPORT("rdtscp", t0);
	t0 = now();
	for (long i = 0; i < N; i++) {
		flag = i;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	}
	REPORT("store + mfence", t0);
	t0 = now();
	for (long i = 0; i < N; i++) {
		flag = __rdtsc();
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		sum += __rdtscp(&aux);
		flag = 0;
	}
	REPORT("stamp, mfence, rdtscp, clear", t0);
	return (int)(sum & 1);
}
