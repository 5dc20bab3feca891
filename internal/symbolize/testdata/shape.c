// A shared library: libshape.so.
#include <stdlib.h>

struct shape {
	int kind;
	double *points;
};

static double *alloc_points(int n) {
	return calloc((size_t)n, 2 * sizeof(double)); /* @alloc_points.calloc */
}

__attribute__((visibility("default"))) struct shape *shape_new(int kind, int n) {
	struct shape *s = malloc(sizeof *s); /* @shape_new.malloc */
	s->kind = kind;
	s->points = alloc_points(n); /* @shape_new.alloc_points */
	return s;
}

__attribute__((visibility("default"))) void shape_free(struct shape *s) {
	free(s->points); /* @shape_free.free */
	free(s);
}
