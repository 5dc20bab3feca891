// Built with -O2: grow is inlined into fill, so the realloc call has two
// frames, grow's and fill's.
#include <stdio.h>
#include <stdlib.h>

static inline __attribute__((always_inline)) int *grow(int *p, int n) {
	int *q = realloc(p, (size_t)n * sizeof *q); /* @grow.realloc */
	if (q == NULL)
		abort();
	return q;
}

__attribute__((noinline)) int *fill(int n) {
	int *p = NULL;
	for (int i = 0; i < n; i++) {
		p = grow(p, i + 1); /* @fill.grow */
		p[i] = i * i;
	}
	return p;
}

int main(int argc, char **argv) {
	int *p = fill(argc * 10); /* @main.fill */
	printf("%d\n", p[argc]);
	free(p);
	return 0;
}
