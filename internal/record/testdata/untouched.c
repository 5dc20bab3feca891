/*
 * A program that allocates big blocks and never touches them, as a program
 * reserving a buffer it may not fill does: they must stay out of its
 * memory under memtrail as natively. It writes its resident set (VmRSS,
 * in KiB) to stdout, then frees the block (a leak scan need not read it). argv[1] says where the blocks come from:
 *
 *   mmap     1 GiB from malloc, which glibc maps on its own;
 *   brk      1 GiB from malloc with glibc's mmap turned off, carved from
 *            the heap grown with brk;
 *   reused   a 64 MiB block of the heap, written, freed, its pages given
 *            back with malloc_trim, then allocated again;
 *   memalign 1 GiB from posix_memalign;
 *   realloc  a small block grown by realloc to 1 GiB.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *volatile sink;

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	while (f != NULL && fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return kib;
}

int main(int argc, char **argv)
{
	const char *how = argc > 1 ? argv[1] : "mmap";
	size_t big = (size_t)1 << 30;
	if (strcmp(how, "brk") == 0) {
		mallopt(M_MMAP_MAX, 0);
		sink = malloc(big);
	} else if (strcmp(how, "reused") == 0) {
		mallopt(M_MMAP_MAX, 0);
		void *p = malloc(64 << 20);
		void *after = malloc(16); /* keeps p from merging into the top */
		memset(p, 1, 64 << 20);
		free(p);
		malloc_trim(0);
		sink = malloc(64 << 20);
		free(after);
	} else if (strcmp(how, "memalign") == 0) {
		void *p;
		if (posix_memalign(&p, 64, big) == 0)
			sink = p;
	} else if (strcmp(how, "realloc") == 0) {
		sink = realloc(malloc(16), big);
	} else {
		sink = malloc(big);
	}
	if (sink == NULL)
		return 2;
	printf("%ld\n", rss_kib());
	free(sink);
	return 0;
}
