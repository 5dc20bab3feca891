/*
 * killedscan: a child with a big heap calls exit, and its parent kills it
 * with SIGTERM while memtrail's leak scan at that exit holds it (as
 * chromium's browser ends its renderers): the child is then blocked in a
 * futex wait, which its parent sees in /proc/PID/syscall. The parent
 * writes to the file argv[1] "killed" if it sent the signal then,
 * "missed" if the child ended first.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { blocks = 1000000 };
void *keep[blocks];

/* in_futex reports whether process pid is blocked in a futex wait. */
static int in_futex(pid_t pid)
{
	char path[64], buf[64] = "";
	snprintf(path, sizeof path, "/proc/%d/syscall", (int)pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	int ok = fgets(buf, sizeof buf, f) != NULL && strncmp(buf, "202 ", 4) == 0;
	fclose(f);
	return ok;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	int fd[2];
	if (pipe(fd) != 0)
		return 1;
	pid_t c = fork();
	if (c < 0)
		return 1;
	if (c == 0) {
		close(fd[0]);
		for (int i = 0; i < blocks; i++)
			keep[i] = malloc(32);
		/* Every event drained: the next futex wait is the scan's. */
		usleep(300000);
		if (write(fd[1], "x", 1) != 1)
			_exit(1);
		exit(0);
	}
	close(fd[1]);
	char b;
	if (read(fd[0], &b, 1) != 1)
		return 1;
	int sent = 0;
	for (int i = 0; i < 200000 && !sent; i++) {
		if (in_futex(c))
			sent = kill(c, SIGTERM) == 0;
		else
			usleep(50);
	}
	int status;
	waitpid(c, &status, 0);
	FILE *out = fopen(argv[1], "w");
	if (out == NULL)
		return 1;
	fputs(sent && WIFSIGNALED(status) ? "killed" : "missed", out);
	return fclose(out) != 0;
}
