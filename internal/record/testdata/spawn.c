/* Children started with posix_spawn and system(). */
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;
void *volatile sink;

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "child") == 0) {
		sink = malloc(42);
		free(sink);
		return 0;
	}
	pid_t pid;
	char *args[] = {argv[0], "child", NULL};
	if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ) != 0)
		return 1;
	int status;
	waitpid(pid, &status, 0);
	return system("exit 3") == 3 << 8 ? 0 : 2;
}
