/* Allocates, then forks a child that execs the program given, with its
 * arguments and, after -e NAME=VALUE, that environment variable in place
 * of its own;
 * prints "child <pid>" and exits with the child's status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	char *extra = NULL;
	int first = 1;
	if (argc > 2 && strcmp(argv[1], "-e") == 0) {
		extra = argv[2];
		first = 3;
	}
	if (first >= argc)
		return 2;
	char *block = malloc(100);
	size_t n = 0, all = 0;
	while (environ[all] != NULL)
		all++;
	char **env = calloc(all + 2, sizeof *env);
	size_t name = extra != NULL ? strcspn(extra, "=") + 1 : 0;
	for (size_t i = 0; i < all; i++) {
		if (extra == NULL || strncmp(environ[i], extra, name) != 0)
			env[n++] = environ[i];
	}
	env[n] = extra;
	pid_t pid = fork();
	if (pid == 0) {
		execve(argv[first], argv + first, env);
		perror("execve");
		_exit(127);
	}
	printf("child %d\n", (int)pid);
	int status;
	if (waitpid(pid, &status, 0) != pid)
		return 2;
	free(env);
	free(block);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
