/* orphan: the program ends at once, and what it started lives on. Its fork
 * child, adopted by the recorder, allocates after a pause and then execs
 * itself, and the new image allocates too: the recording goes on until
 * they are done. A spawned child execs only after the program ended. */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

/* allocate allocates and frees n bytes; volatile keeps the compiler from
 * leaving the pair out. */
static void allocate(size_t n)
{
	void *volatile p = malloc(n);
	free(p);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "late") == 0) {
		allocate(333);
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "spawned") == 0) {
		allocate(444);
		return 0;
	}
	if (fork() == 0) {
		usleep(200 * 1000);
		allocate(222);
		execl("/proc/self/exe", argv[0], "late", (char *)NULL);
		_exit(1);
	}
	/* sh execs the program after a pause, long after main returned. */
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "sleep 0.3; exec %s spawned", argv[0]);
	char *args[] = {"sh", "-c", cmd, NULL};
	pid_t pid;
	posix_spawn(&pid, "/bin/sh", NULL, NULL, args, environ);
	allocate(111);
	return 0;
}
