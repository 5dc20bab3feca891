/*
 * Threads that come and go, so that new threads get the thread pointers
 * (the TCBs, at the top of reused stacks) of threads gone before them:
 * the agent caches each thread's state by its thread pointer, and a new
 * thread must never be taken for an old one. Each process runs ROUNDS
 * threads one after the other; thread i allocates i+1 blocks and frees
 * them, and prints its tid, its thread pointer and i+1. The parent forks
 * while a thread of its own is still alive (waiting on a pipe): in the
 * child, that thread is gone and its stack free for the child's threads.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 12

static void *worker(void *arg)
{
	long n = (long)arg;
	void *blocks[ROUNDS];
	for (long i = 0; i < n; i++)
		blocks[i] = malloc(24 + (size_t)i * 8);
	for (long i = 0; i < n; i++)
		free(blocks[i]);
	printf("%d %lx %ld\n", gettid(), (unsigned long)pthread_self(), n);
	fflush(stdout);
	return NULL;
}

static int rounds(void)
{
	for (long i = 0; i < ROUNDS; i++) {
		pthread_t th;
		if (pthread_create(&th, NULL, worker, (void *)(i + 1)) != 0 || pthread_join(th, NULL) != 0)
			return 1;
	}
	return 0;
}

static int gate[2];

static void *waiter(void *arg)
{
	(void)arg;
	void *volatile p = malloc(8); /* volatile: kept, and freed by its own free */
	free(p);
	char c;
	(void)!read(gate[0], &c, 1);
	return NULL;
}

int main(void)
{
	/* stdout's buffer is allocated here, not by the first worker. */
	printf("start\n");
	fflush(stdout);
	if (rounds() != 0 || pipe(gate) != 0)
		return 1;
	pthread_t th;
	if (pthread_create(&th, NULL, waiter, NULL) != 0)
		return 1;
	pid_t pid = fork();
	if (pid == 0)
		return rounds();
	int status = 1;
	(void)!write(gate[1], "x", 1);
	pthread_join(th, NULL);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
