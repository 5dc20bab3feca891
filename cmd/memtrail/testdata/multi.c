/*
 * Many processes with known heaps, for the reports of multi-process traces.
 *
 *   multi fork N    the parent keeps 1 MiB live, loses 300 bytes (no
 *                   pointer to them is left) and forks N children; each
 *                   frees the 100-byte block it inherited, keeps 10 KiB of
 *                   its own and exits; every fourth child execs
 *                   "multi image" instead, which keeps 20 KiB
 *   multi exec2     one pid, three images: keeps 1 KiB, execs "multi
 *                   exec1", which keeps 2 KiB and execs "multi image"
 *   multi image     keeps 20 KiB
 *   multi short     about 15 ms: 1 MiB live from about 7 ms to 8 ms
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void *volatile sink[4];

static void pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0) {
	}
}

static void *keep(size_t n)
{
	void *p = malloc(n);
	memset(p, 1, n);
	return p;
}

char *lose(void) { return malloc(300); }

static void run(char *self, const char *mode)
{
	execl("/proc/self/exe", self, mode, (char *)NULL);
	_exit(99);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	if (strcmp(mode, "image") == 0) {
		sink[0] = keep(20 << 10);
		return 0;
	}
	if (strcmp(mode, "exec2") == 0) {
		sink[0] = keep(1 << 10);
		run(argv[0], "exec1");
	}
	if (strcmp(mode, "exec1") == 0) {
		sink[0] = keep(2 << 10);
		run(argv[0], "image");
	}
	if (strcmp(mode, "short") == 0) {
		pause_ms(7);
		sink[0] = keep(1 << 20);
		pause_ms(1);
		free(sink[0]);
		pause_ms(7);
		return 0;
	}
	if (strcmp(mode, "fork") == 0 && argc > 2) {
		int n = atoi(argv[2]);
		sink[0] = keep(1 << 20);
		sink[1] = keep(100);
		lose();
		for (int i = 0; i < n; i++) {
			pid_t pid = fork();
			if (pid == 0) {
				if (i % 4 == 3)
					run(argv[0], "image");
				free(sink[1]);
				sink[2] = keep(10 << 10);
				exit(0);
			}
			int status;
			if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
				return 1;
		}
		return 0;
	}
	return 2;
}
