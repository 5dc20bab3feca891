// Uses libshape.so, or is linked with shape.c (with -flto, to inline
// across files).
struct shape;
struct shape *shape_new(int kind, int n);
void shape_free(struct shape *s);

// Storing the shape here keeps the compiler from dropping the malloc and
// free pair when it sees both.
void *volatile sink;

int main(int argc, char **argv) {
	(void)argv;
	struct shape *s = shape_new(argc, 4); /* @main.shape_new */
	sink = s;
	shape_free(s);
	return 0;
}
