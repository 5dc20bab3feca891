/*
 * calls.c: function calls the tests know, for exact mode (built with
 * -finstrument-functions and -fstack-usage). recurse has a frame of a
 * known size (gcc -fstack-usage says how big) and goes down to known
 * depths in phases a few time units apart: shallow, deep, shallow again,
 * then in a thread. Nothing allocates below main or worker.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define SHALLOW 20
#define DEEP 60
#define THREAD_DEPTH 30

void *volatile sink;

/* recurse fills its buffer, the bottom of its frame, and goes deeper. */
__attribute__((noinline, noclone)) int recurse(int n)
{
	volatile char buf[500];
	for (int i = 0; i < (int)sizeof buf; i++)
		buf[i] = (char)(n + i);
	if (n == 0)
		return buf[1];
	return recurse(n - 1) + buf[n % 500];
}

__attribute__((noinline, noclone)) void *worker(void *arg)
{
	(void)arg;
	sink = malloc(16); /* the stack in use here is the thread's base */
	free(sink);
	recurse(THREAD_DEPTH);
	return NULL;
}

int main(void)
{
	sink = malloc(16); /* the stack in use here is main's base */
	free(sink);
	usleep(20000);
	recurse(SHALLOW);
	usleep(20000);
	recurse(DEEP);
	usleep(20000);
	recurse(SHALLOW);
	usleep(20000);
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL) != 0)
		return 1;
	pthread_join(t, NULL);
	return 0;
}
