/* A parent and a forked child, each with its own heap story. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile sink;

int main(void)
{
	void *before = malloc(1000);
	pid_t pid = fork();
	if (pid == 0) {
		void *x = malloc(2000);
		void *y = malloc(3000);
		free(x);
		free(before);
		sink = y;
		exit(7);
	}
	int status;
	waitpid(pid, &status, 0);
	void *after = malloc(4000);
	free(after);
	return WEXITSTATUS(status) == 7 ? 0 : 1;
}
