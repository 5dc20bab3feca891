/*
 * killed.c: a child that kills its own children. The program forks a
 * child, which forks N grandchildren (the argument, default 1) one after
 * another; each grandchild allocates, says so through a pipe and waits to
 * be killed; the child kills it with SIGKILL and reaps it at once, before
 * the recorder can see it as a zombie. The child then exits normally, and
 * so does the program: they are scanned at exit, the grandchildren not.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile sink;

static void grandchild(int ready)
{
	sink = malloc(4000);
	if (write(ready, "x", 1) != 1)
		_exit(3);
	for (;;)
		pause();
}

static int child(int n)
{
	for (int i = 0; i < n; i++) {
		int fds[2];
		char c;
		if (pipe(fds) != 0)
			return 1;
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			close(fds[0]);
			grandchild(fds[1]);
		}
		close(fds[1]);
		if (read(fds[0], &c, 1) != 1)
			return 1;
		close(fds[0]);
		int status;
		if (kill(pid, SIGKILL) != 0 || waitpid(pid, &status, 0) != pid ||
		    !WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
			return 1;
	}
	sink = malloc(300);
	sink = NULL; /* leaked: the child's scan finds it */
	return 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;
	void *mine = malloc(200);
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0)
		exit(child(n));
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 1;
	free(mine);
	return WEXITSTATUS(status);
}
