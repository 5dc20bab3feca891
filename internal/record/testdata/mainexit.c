/*
 * main ends its thread with pthread_exit and another thread ends the
 * process with exit(0): the thread-group leader is then a zombie, without
 * memory, while the process is scanned for leaks. The thread leaves a
 * block kept by a global (still reachable), a lost one (definitely) and
 * one only the lost one points to (indirectly); main leaves a block whose
 * address is only in its stack below where its thread ended (definitely
 * lost: no root). Like leaks.c, the program prints nothing and clears the
 * stack it used, so that no stale pointer keeps a block.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct node {
	struct node *next;
	char pad[32];
};

void *kept_by_global;

static void lose(void *volatile *p) { *p = NULL; }

/* bury allocates a block 20 frames of 1 KiB below its caller and keeps
 * its address only in a local there, stale once the calls return. */
static __attribute__((noinline)) void bury(int depth)
{
	volatile char pad[1024];
	pad[0] = (char)depth;
	if (depth > 0) {
		bury(depth - 1);
		return;
	}
	void *volatile p = calloc(1, 176);
	(void)p;
}

static __attribute__((noinline)) void leave_blocks(void)
{
	kept_by_global = calloc(1, 100);
	struct node *lost = calloc(1, sizeof *lost);
	lost->next = calloc(1, 56);
	void *volatile l = lost;
	lost = NULL;
	lose(&l);
}

static __attribute__((noinline)) void clear_stack(void)
{
	volatile char buf[16384];
	memset((char *)buf, 0, sizeof buf);
}

/* leader_gone says whether main's thread has ended (its stat says it is a
 * zombie), read without stdio, whose buffer would be one more block. */
static int leader_gone(void)
{
	char path[64], buf[512];
	char pid[16];
	int n = 0;
	for (int v = getpid(); v > 0; v /= 10)
		pid[n++] = (char)('0' + v % 10);
	strcpy(path, "/proc/self/task/");
	size_t at = strlen(path);
	while (n > 0)
		path[at++] = pid[--n];
	strcpy(path + at, "/stat");
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 1;
	ssize_t r = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (r <= 0)
		return 1;
	buf[r] = 0;
	char *end = strrchr(buf, ')');
	return end == NULL || end[2] == 'Z' || end[2] == 'X';
}

static void *worker(void *arg)
{
	(void)arg;
	while (!leader_gone()) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	leave_blocks();
	clear_stack();
	exit(0);
}

int main(void)
{
	bury(20);
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL) != 0)
		return 1;
	pthread_exit(NULL);
}
