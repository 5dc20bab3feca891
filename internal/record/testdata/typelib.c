/* A library of the program's own for TestTypes, with a type of its own,
 * which it prints as "lib size name". No header is included. */
int printf(const char *, ...);
void *malloc(unsigned long);
void free(void *);

struct lib_state {
	long counters[5];
	char name[12];
};

void make_state(void)
{
	struct lib_state *s = malloc(sizeof *s);
	printf("lib %lu lib_state\n", (unsigned long)sizeof *s);
	free(s);
}
