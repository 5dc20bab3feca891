/* Runs itself as a child after taking the agent's variables out of its own
 * environment, in the way argv[1] says; the child allocates 777 bytes.
 * "exec PROG" runs PROG with execv instead. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;
void *volatile sink;

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	const char *mode = argv[1];
	if (strcmp(mode, "child") == 0) {
		sink = malloc(777);
		return 0;
	}
	if (strcmp(mode, "exec") == 0 && argc > 2) {
		sink = malloc(111);
		char *args[] = {argv[2], NULL};
		execv(argv[2], args);
		return 5;
	}
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return 2;
	self[n] = 0;
	char *args[] = {self, "child", NULL};
	if (strcmp(mode, "clearenv-execve") == 0) {
		clearenv();
		execve(self, args, environ);
	} else if (strcmp(mode, "unsetenv-execv") == 0) {
		unsetenv("LD_PRELOAD");
		execv(self, args);
	} else if (strcmp(mode, "unsetenv-execvp") == 0) {
		unsetenv("LD_PRELOAD");
		unsetenv("MEMTRAIL_SOCK");
		execvp(self, args);
	} else if (strcmp(mode, "unsetenv-execl") == 0) {
		unsetenv("LD_PRELOAD");
		execl(self, self, "child", (char *)NULL);
	} else if (strcmp(mode, "unsetenv-execlp") == 0) {
		unsetenv("LD_PRELOAD");
		execlp(self, self, "child", (char *)NULL);
	} else if (strcmp(mode, "clearenv-execle") == 0) {
		char *env[] = {"A=1", NULL};
		clearenv();
		execle(self, self, "child", (char *)NULL, env);
	} else if (strcmp(mode, "unsetenv-system") == 0) {
		char cmd[4200];
		snprintf(cmd, sizeof cmd, "%s child", self);
		unsetenv("LD_PRELOAD");
		return system(cmd) == 0 ? 0 : 3;
	} else if (strcmp(mode, "unsetenv-popen") == 0) {
		char cmd[4200];
		snprintf(cmd, sizeof cmd, "%s child", self);
		clearenv();
		FILE *f = popen(cmd, "r");
		if (f == NULL)
			return 3;
		return pclose(f) == 0 ? 0 : 3;
	}
	return 4; /* an unknown mode, or the exec failed */
}
