/* Runs children with environments of its own making, which lack the
 * agent's variables: the agent must put them back. */
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile sink;

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "child") == 0) {
		sink = malloc(777);
		return 0;
	}
	char *args[] = {argv[0], "child", NULL};
	char *env[] = {"A=1", "LD_PRELOAD=", NULL};
	pid_t pid;
	if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, env) != 0)
		return 1;
	waitpid(pid, NULL, 0);
	execve("/proc/self/exe", args, env);
	return 2;
}
