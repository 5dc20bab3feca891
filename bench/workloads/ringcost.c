/*
 * ringcost.c: what a ring buffer shared with another core costs its
 * writer, as the agent and the recorder share one. The writer publishes
 * 16M records of 4 words; the reader drains them on the other core.
 *
 *   gcc -O2 -pthread -o ringcost ringcost.c
 *   ./ringcost MODE MINBATCH WORK PUBEVERY
 *
 * MODE bit 0: take a sequence number with lock xadd; bit 1: read rdtsc.
 * MINBATCH: the reader waits until this many words are pending (0: it
 * reads each record as soon as it is published). WORK: busy loop per
 * record in the reader. PUBEVERY: publish the write position every N
 * records. It prints the writer's CPU time per record.
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define RING (1u << 17)
static uint64_t ring[RING] __attribute__((aligned(64)));
static struct { _Alignas(64) volatile uint64_t write; _Alignas(64) volatile uint64_t read; _Alignas(64) uint64_t seq; } ctl;
static int mode, minbatch, work, pubevery;
static long N = 16000000;
static volatile int done;
static double waitspins;

static double now(clockid_t c) { struct timespec ts; clock_gettime(c, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; }

static void *reader(void *arg)
{
	uint64_t pos = 0, sum = 0;
	for (;;) {
		uint64_t w = __atomic_load_n(&ctl.write, __ATOMIC_ACQUIRE);
		if (w - pos < (uint64_t)minbatch * 8 && !done) { struct timespec ts = {0, 20000}; nanosleep(&ts, NULL); continue; }
		if (w == pos) { if (done) break; continue; }
		while (pos < w) { sum += ring[(pos / 8) & (RING - 1)]; pos += 8; for (volatile int k = 0; k < work; k++); }
		__atomic_store_n(&ctl.read, pos, __ATOMIC_RELEASE);
	}
	return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv)
{
	mode = atoi(argv[1]); minbatch = atoi(argv[2]); work = atoi(argv[3]); pubevery = atoi(argv[4]);
	pthread_t th; pthread_create(&th, NULL, reader, NULL);
	double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_THREAD_CPUTIME_ID);
	uint64_t limit = RING * 8, w = 0; long spins = 0;
	for (long i = 0; i < N; i++) {
		uint64_t rec[4];
		rec[0] = 0x50402;
		rec[1] = (mode & 1) ? __atomic_fetch_add(&ctl.seq, 1, __ATOMIC_SEQ_CST) : ctl.seq++;
		rec[2] = (mode & 2) ? __rdtsc() : i;
		rec[3] = i * 48;
		while (w + 32 > limit) { limit = __atomic_load_n(&ctl.read, __ATOMIC_ACQUIRE) + RING * 8; spins++; _mm_pause(); }
		uint64_t at = (w / 8) & (RING - 1);
		for (int k = 0; k < 4; k++) ring[at + k] = rec[k];
		w += 32;
		if (i % pubevery == 0) __atomic_store_n(&ctl.write, w, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&ctl.write, w, __ATOMIC_RELEASE);
	double c1 = now(CLOCK_THREAD_CPUTIME_ID);
	done = 1;
	pthread_join(th, NULL);
	printf("mode %d minbatch %d work %d pub %d: wall %.1f ns/rec, writer cpu %.1f ns/rec, full-spins %ld\n", mode, minbatch, work, pubevery, (now(CLOCK_MONOTONIC) - t0) / N * 1e9, (c1 - c0) / N * 1e9, spins);
	return 0;
}
