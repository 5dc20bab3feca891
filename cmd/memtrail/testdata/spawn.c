/* Allocates, then starts the program given, with its arguments, with
 * posix_spawn, or with posix_spawnp after -p DIR (DIR put first in PATH),
 * or after -v with vfork, twice, one child after the other, in each
 * trying the programs given up to "--" in turn, as Python's subprocess
 * tries each directory of PATH; prints "child <pid>" (and "child2 <pid>"
 * with -v) and "parent <its own pid>" and exits with the (first) child's
 * status, or says why the spawn failed and exits with 127. */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* run_vfork starts a vfork child that execs the programs of argv in turn,
 * up to "--", with the arguments after it, and returns its exit status.
 * Nothing between the two children's vforks enters the allocator. */
static int run_vfork(char **argv, pid_t *pid)
{
	char **args = argv;
	while (*args != NULL && strcmp(*args, "--") != 0)
		args++;
	if (*args != NULL)
		args++;
	*pid = vfork();
	if (*pid == 0) {
		for (char **p = argv; *p != NULL && strcmp(*p, "--") != 0; p++)
			execv(*p, args);
		_exit(127);
	}
	int status;
	if (*pid < 0 || waitpid(*pid, &status, 0) != *pid)
		return 2;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv)
{
	int first = 1, search = 0, use_vfork = 0;
	if (argc > 2 && strcmp(argv[1], "-p") == 0) {
		const char *old = getenv("PATH");
		char *path = malloc(strlen(argv[2]) + (old ? strlen(old) : 0) + 2);
		sprintf(path, "%s:%s", argv[2], old ? old : "");
		setenv("PATH", path, 1);
		free(path);
		first = 3;
		search = 1;
	} else if (argc > 1 && strcmp(argv[1], "-v") == 0) {
		first = 2;
		use_vfork = 1;
	}
	if (first >= argc)
		return 2;
	char *block = malloc(100);
	if (use_vfork) {
		pid_t pid, pid2;
		int status = run_vfork(argv + first, &pid);
		run_vfork(argv + first, &pid2);
		printf("child %d\nchild2 %d\nparent %d\n", (int)pid, (int)pid2, (int)getpid());
		free(block);
		return status;
	}
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
