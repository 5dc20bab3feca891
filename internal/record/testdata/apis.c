/* Every C allocation entry point, with known counts. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile keep[64];
static int nkeep;

__attribute__((noinline)) static void *grow(void *p, size_t n) { return realloc(p, n); }

int main(int argc, char **argv)
{
	void *a = malloc(100);
	void *b = calloc(10, 20);
	a = grow(a, 200);          /* moves or not: one alloc + one free either way */
	a = grow(a, 50);           /* shrinks */
	b = reallocarray(b, 30, 10);
	void *c = realloc(NULL, 64); /* an allocation */
	void *d = realloc(c, 0);     /* a release (glibc returns NULL) */
	(void)d;
	void *e = NULL;
	if (posix_memalign(&e, 64, 1000) != 0)
		return 1;
	void *f = aligned_alloc(128, 256);
	void *g = memalign(32, 77);
	void *h = valloc(5000);
	/* valgrind 3.19 aborts on pvalloc: only on request. */
	void *i = argc > 1 && strcmp(argv[1], "pvalloc") == 0 ? pvalloc(100) : NULL;
	char *s = strdup("a string allocated inside libc");
	keep[nkeep++] = malloc(0);
	keep[nkeep++] = malloc(12345);
	free(a);
	free(b);
	free(e);
	free(f);
	free(g);
	free(h);
	free(i);
	free(s);
	free(NULL);
	return 0;
}
