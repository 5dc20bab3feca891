/* Dies in the way argv[1] says, after known allocations. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *volatile sink;

int main(int argc, char **argv)
{
	for (int i = 0; i < 1000; i++)
		sink = malloc(100);
	void *p = malloc(10);
	free(p);
	const char *how = argc > 1 ? argv[1] : "segv";
	if (strcmp(how, "segv") == 0)
		*(volatile int *)0 = 1;
	if (strcmp(how, "abort") == 0)
		abort();
	if (strcmp(how, "kill") == 0)
		raise(SIGKILL);
	if (strcmp(how, "invalidfree") == 0) {
		/* A pointer into a live block, off its alignment: glibc's
		 * first check refuses it and aborts (free(): invalid pointer)
		 * whatever the memory before it holds, which a local's
		 * address would leave to the stack's stale words. */
		free((char *)sink + 1);
	}
	if (strcmp(how, "doublefree") == 0) {
		void *q = malloc(24);
		free(q);
		free(q); /* glibc aborts here */
	}
	if (strcmp(how, "wait") == 0) {
		/* Tell the test we are ready, then wait to be killed. */
		char msg[32];
		int n = snprintf(msg, sizeof msg, "ready %d\n", (int)getpid());
		(void)!write(1, msg, (size_t)n);
		pause();
	}
	return 0;
}
