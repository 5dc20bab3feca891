/* Reads stdin, or writes stdout or stderr, as its argument says, through
 * the heap, and says on stderr how it went: with the stream closed, the
 * read or write fails with EBADF and the program exits with 3. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	char *buf = malloc(64);
	ssize_t n;
	if (strcmp(argv[1], "stdin") == 0) {
		n = read(0, buf, 64);
	} else {
		strcpy(buf, "hello\n");
		n = write(strcmp(argv[1], "stdout") == 0 ? 1 : 2, buf, strlen(buf));
	}
	int err = errno;
	free(buf);
	if (n < 0) {
		fprintf(stderr, "%s: %s\n", argv[1], strerror(err));
		return 3;
	}
	fprintf(stderr, "%s: %zd bytes\n", argv[1], n);
	return 0;
}
