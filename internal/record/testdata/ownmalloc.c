/*
 * ownmalloc: a program that defines malloc, free, calloc and realloc
 * itself, on top of glibc's, as chromium's allocator shim does. The
 * executable exports them (libc's calls to malloc bind to them), so the
 * dynamic linker binds every call to them to the program's, not to
 * memtrail's agent. It allocates directly, and through libc: strdup,
 * asprintf, fopen. With "fork", a child process does the same.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

void *malloc(size_t n) { return __libc_malloc(n); }
void free(void *p) { __libc_free(p); }
void *calloc(size_t n, size_t size) { return __libc_calloc(n, size); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }

static void work(void)
{
	char *direct = malloc(100);
	char *zeroed = calloc(4, 8);
	direct = realloc(direct, 200);
	char *copy = strdup("made by libc");
	char *printed;
	if (asprintf(&printed, "%s %d", copy, 42) < 0)
		exit(1);
	FILE *f = fopen("/proc/self/stat", "r");
	if (f != NULL) {
		char line[64];
		if (fgets(line, sizeof line, f) == NULL)
			line[0] = 0;
		fclose(f);
	}
	free(printed);
	free(copy);
	free(zeroed);
	free(direct);
}

int main(int argc, char **argv)
{
	work();
	if (argc > 1 && strcmp(argv[1], "fork") == 0) {
		pid_t child = fork();
		if (child == 0) {
			work();
			_exit(0);
		}
		waitpid(child, NULL, 0);
	}
	return 0;
}
