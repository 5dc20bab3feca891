/* threads.c: blocks still in use at exit, none lost: 100 bytes from
 * main, 200 from the library helper.so (its stripped code), 300 from a
 * second thread (and the thread's own, which pthread_create allocates and
 * points into: possibly lost). With the argument "alone", no thread: all
 * still reachable. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void *helper_alloc(size_t n);

void *kept[3];

__attribute__((noinline)) static void *main_alloc(size_t n) { return malloc(n); }

__attribute__((noinline)) static void *thread_alloc(void *arg)
{
	(void)arg;
	kept[2] = malloc(300);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;
	kept[0] = main_alloc(100);
	kept[1] = helper_alloc(200);
	if (argc > 1 && strcmp(argv[1], "alone") == 0)
		return 0;
	if (pthread_create(&t, NULL, thread_alloc, NULL) != 0 || pthread_join(t, NULL) != 0)
		return 1;
	return 0;
}
