/*
 * The first thread of a process allocates flat out while a second one
 * starts and allocates too, in argv[1] forked children one after the
 * other: while it is alone, the first thread takes sequence numbers
 * without a locked instruction, and the second must take over from it
 * without a number taken twice or skipped. Blocks go from one thread to
 * the other, and every block is freed.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 20000
#define KEPT 64

static void *volatile mailbox;

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		void *q = __atomic_exchange_n(&mailbox, malloc(16 + i % 48), __ATOMIC_ACQ_REL);
		free(q);
	}
	return NULL;
}

static int churn(void)
{
	void *kept[KEPT] = {0};
	pthread_t th;
	/* Alone first: the thread is the sole one, and warm. */
	for (int i = 0; i < ROUNDS; i++) {
		free(kept[i % KEPT]);
		kept[i % KEPT] = malloc(16 + i % 48);
	}
	if (pthread_create(&th, NULL, worker, NULL) != 0)
		return 1;
	/* Racing with the worker's first allocations, and then its blocks. */
	for (int i = 0; i < ROUNDS; i++) {
		free(kept[i % KEPT]);
		kept[i % KEPT] = malloc(16 + i % 48);
		if (i % 4 == 0)
			free(__atomic_exchange_n(&mailbox, NULL, __ATOMIC_ACQ_REL));
	}
	pthread_join(th, NULL);
	free(mailbox);
	for (int i = 0; i < KEPT; i++)
		free(kept[i]);
	return 0;
}

int main(int argc, char **argv)
{
	int children = argc > 1 ? atoi(argv[1]) : 1;
	for (int c = 0; c < children; c++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0)
			_exit(churn());
		int status;
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			return 1;
	}
	return churn();
}
