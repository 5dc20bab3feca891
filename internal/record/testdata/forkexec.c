/* A parent that holds a known heap and, many times over, forks a child
 * that execs at once: each child's image before the exec has the
 * parent's heap, however soon the exec comes. The new image allocates one
 * block and forks a grandchild at once, which exits: the grandchild's
 * heap is that block, of the new image, not anything of the old one. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCKS 100

static void *held[BLOCKS];

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "child") == 0) {
		void *volatile mine = malloc(24);
		pid_t pid = fork();
		if (pid == 0)
			_exit(0);
		int status;
		if (pid < 0 || waitpid(pid, &status, 0) != pid)
			return 1;
		free(mine);
		return 0;
	}
	int children = argc > 1 ? atoi(argv[1]) : 200;
	for (int i = 0; i < BLOCKS; i++)
		held[i] = malloc((size_t)(i + 1) * 16);
	for (int i = 0; i < children; i++) {
		pid_t pid = fork();
		if (pid < 0)
			return 2;
		if (pid == 0) {
			execl("/proc/self/exe", argv[0], "child", (char *)NULL);
			_exit(99);
		}
		int status;
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			return 1;
	}
	for (int i = 0; i < BLOCKS; i++)
		free(held[i]);
	return 0;
}
