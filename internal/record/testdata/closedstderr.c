/* Started with stderr closed: opens its output file, which takes fd 2,
 * tells its watcher it is ready, and allocates on after the recorder is
 * killed, until its ring fills. Nothing but its own words must be in the
 * file: natively nothing else writes to fd 2. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *volatile sink;

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd != 2)
		return 3;
	printf("ready\n");
	fflush(stdout);
	sleep(1);
	/* Enough events to fill a ring many times over once nobody drains it. */
	for (int i = 0; i < 2000000; i++) {
		sink = malloc(32);
		free(sink);
	}
	const char *done = "finished\n";
	write(fd, done, strlen(done));
	return 0;
}
