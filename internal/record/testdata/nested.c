/* Library functions that allocate by calling malloc, realloc or free
 * themselves (through the PLT, where the agent's hooks catch them): each
 * call the program makes must be recorded once, by the hook the program
 * called or by the innermost one, and none counted as lost. An argument
 * names one group to run alone; none runs them all. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

static int run(const char *only, const char *name) { return only == NULL || strcmp(only, name) == 0; }

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;
	if (run(only, "reallocarray")) {
		int *a = reallocarray(NULL, 10, sizeof *a); /* an allocation */
		a = reallocarray(a, 1000, sizeof *a);        /* grows */
		a = reallocarray(a, 3, sizeof *a);           /* shrinks */
		volatile size_t huge = SIZE_MAX / 2; /* hidden from the compiler's check */
		errno = 0;
		if (reallocarray(a, huge, 4) != NULL || errno != ENOMEM)
			return 1; /* overflow: a is left alone */
		free(a);
	}
	if (run(only, "strings")) {
		free(strdup("a string duplicated"));
		free(strndup("a string cut short", 8));
		free(wcsdup(L"a wide string"));
		char *s = NULL;
		if (asprintf(&s, "%d %s", 42, "formatted") < 0)
			return 1;
		free(s);
	}
	if (run(only, "streams")) {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		for (int i = 0; i < 1000; i++)
			fprintf(f, "line %d\n", i);
		fclose(f);
		f = fmemopen(buf, len, "r");
		char *line = NULL;
		size_t cap = 0;
		while (getline(&line, &cap, f) > 0)
			;
		fclose(f);
		free(line);
		free(buf);
	}
	if (run(only, "aligned")) {
		void *p = NULL;
		if (posix_memalign(&p, 64, 100) != 0)
			return 1;
		free(p);
		free(aligned_alloc(256, 512));
		free(memalign(32, 1000));
		free(valloc(100));
	}
	if (run(only, "realloc")) {
		char *p = realloc(NULL, 10);
		p = realloc(p, 100000);
		p = realloc(p, 10);
		p = realloc(p, 0); /* glibc frees and returns NULL */
		free(calloc(100, 100));
		free(p);
	}
	return 0;
}
