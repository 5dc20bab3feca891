/*
 * stackuse.c: stack use the tests know. Its functions have frames of
 * known sizes (gcc -fstack-usage says how big) and recurse to known
 * depths.
 *
 * With no argument (sampled stacks, stackuse_test.go): the main thread's
 * and a thread's deepest points come between heap events (nothing
 * allocates there), and one allocation is made at a known depth.
 *
 * With "phases" (exact mode, built with -finstrument-functions,
 * calls_test.go): main recurses in phases a few time units apart,
 * shallow, deep, shallow again, then a thread recurses; nothing
 * allocates below main or worker.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAIN_DEPTH 40
#define THREAD_DEPTH 25
#define ALLOC_DEPTH 10

#define PHASE_SHALLOW 20
#define PHASE_DEEP 60
#define PHASE_THREAD 30

void *volatile sink;
static int thread_depth = THREAD_DEPTH;

/* recurse fills its buffer, the bottom of its frame, and goes deeper. */
__attribute__((noinline, noclone)) int recurse(int n)
{
	volatile char buf[700];
	for (int i = 0; i < (int)sizeof buf; i++)
		buf[i] = (char)(n + i);
	if (n == 0)
		return buf[1];
	return recurse(n - 1) + buf[n % 700];
}

/* alloc_deep allocates at its deepest level. */
__attribute__((noinline, noclone)) int alloc_deep(int n)
{
	volatile char buf[300];
	buf[0] = (char)n;
	if (n == 0) {
		sink = malloc(33);
		free(sink);
		return buf[0];
	}
	return alloc_deep(n - 1) + buf[0];
}

__attribute__((noinline, noclone)) void *worker(void *arg)
{
	(void)arg;
	sink = malloc(16); /* the stack in use here is the thread's base */
	free(sink);
	recurse(thread_depth);
	return NULL;
}

int main(int argc, char **argv)
{
	sink = malloc(16); /* the stack in use here is main's base */
	free(sink);
	if (argc > 1 && strcmp(argv[1], "phases") == 0) {
		for (int i = 0; i < 3; i++) {
			usleep(20000);
			recurse(i == 1 ? PHASE_DEEP : PHASE_SHALLOW);
		}
		usleep(20000);
		thread_depth = PHASE_THREAD;
	} else {
		recurse(MAIN_DEPTH);
		alloc_deep(ALLOC_DEPTH);
	}
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL) != 0)
		return 1;
	pthread_join(t, NULL);
	return 0;
}
