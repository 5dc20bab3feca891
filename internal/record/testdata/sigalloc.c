/* A SIGALRM handler that allocates while the main loop allocates: a
 * signal that lands while the main thread is inside the agent's hook
 * loses the handler's events, which is expected and reported. The
 * handler keeps its blocks from one signal to later ones (it frees one
 * and allocates another in its place), so a block whose allocation was lost is
 * freed, seen, by a later signal: the program itself never frees wrongly.
 *
 * malloc is not async-signal-safe in general. Here it is safe enough: the
 * program has one thread (glibc takes no arena lock), the main loop's
 * small blocks come and go through the thread cache only, and the
 * handler's blocks are too big for that cache, so the two never touch
 * the same allocator state. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static void *volatile held[16];
static volatile sig_atomic_t signals;

static void on_alarm(int sig)
{
	(void)sig;
	int k = signals % 16;
	free(held[k]);
	held[k] = malloc(2048 + (size_t)(signals % 7) * 1024);
	signals++;
}

int main(int argc, char **argv)
{
	long want = argc > 1 ? atol(argv[1]) : 2000;
	free(malloc(100)); /* the thread cache now holds the main loop's block */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {{0, 100}, {0, 100}};
	setitimer(ITIMER_REAL, &it, NULL);
	/* Bounded: a machine that never delivers the timer ends anyway. */
	for (long i = 0; signals < want && i < 100000000; i++) {
		void *volatile p = malloc(100);
		free(p);
	}
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	for (int k = 0; k < 16; k++)
		free(held[k]);
	return 0;
}
