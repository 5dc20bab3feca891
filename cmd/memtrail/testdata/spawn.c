/* Allocates, then starts the program given, with its arguments, with
 * posix_spawn, or with posix_spawnp after -p DIR (DIR put first in PATH);
 * prints "child <pid>" and "parent <its own pid>" and exits with the child's status, or says why the
 * spawn failed and exits with 127. */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	int first = 1, search = 0;
	if (argc > 2 && strcmp(argv[1], "-p") == 0) {
		const char *old = getenv("PATH");
		char *path = malloc(strlen(argv[2]) + (old ? strlen(old) : 0) + 2);
		sprintf(path, "%s:%s", argv[2], old ? old : "");
		setenv("PATH", path, 1);
		free(path);
		first = 3;
		search = 1;
	}
	if (first >= argc)
		return 2;
	char *block = malloc(100);
	pid_t pid;
	int err = search ? posix_spawnp(&pid, argv[first], NULL, NULL, argv + first, environ)
			 : posix_spawn(&pid, argv[first], NULL, NULL, argv + first, environ);
	if (err != 0) {
		fprintf(stderr, "spawn %s: %s\n", argv[first], strerror(err));
		return 127;
	}
	printf("child %d\nparent %d\n", (int)pid, (int)getpid());
	fflush(stdout);
	int status;
	if (waitpid(pid, &status, 0) != pid)
		return 2;
	free(block);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
