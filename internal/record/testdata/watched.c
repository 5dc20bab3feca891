/*
 * A program whose end memtrail must find without a pidfd (see
 * nopidfd.c), and not before it. A child allocates and exits with status
 * 4, reaped by its parent. Then main's thread ends by pthread_exit, a
 * zombie while the process runs on; after a pause of more than a second
 * the other thread allocates 2,000 blocks, frees 1,000 of them, and ends
 * the process with exit(3).
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *blocks[2000];

static void *late(void *arg)
{
	(void)arg;
	struct timespec pause = {1, 300000000};
	nanosleep(&pause, NULL);
	for (int i = 0; i < 2000; i++)
		blocks[i] = malloc(16 + i % 7 * 8);
	for (int i = 0; i < 2000; i += 2)
		free(blocks[i]);
	exit(3);
}

int main(void)
{
	pid_t child = fork();
	if (child == 0) {
		for (int i = 0; i < 500; i++)
			blocks[i] = malloc(32);
		exit(4);
	}
	if (child < 0 || waitpid(child, NULL, 0) != child)
		return 1;
	pthread_t t;
	if (pthread_create(&t, NULL, late, NULL) != 0)
		return 1;
	pthread_exit(NULL);
}
