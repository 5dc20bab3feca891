/* Copies stdin to stdout in upper case, line by line, through the heap. */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, stdin)) > 0) {
		char *copy = malloc((size_t)n + 1);
		for (ssize_t i = 0; i <= n; i++)
			copy[i] = (char)toupper((unsigned char)line[i]);
		fputs(copy, stdout);
		free(copy);
	}
	free(line);
	fprintf(stderr, "done\n");
	return argc > 1 ? atoi(argv[1]) : 0;
}
