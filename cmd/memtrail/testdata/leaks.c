/* leaks.c: blocks still allocated at exit from two call stacks, one
 * through glibc's strdup, and a short-lived 1 MiB peak. Built with
 * -DSCALE=2, the buffers are 1000 bytes bigger each. */
#include <stdlib.h>
#include <string.h>

#ifndef SCALE
#define SCALE 1
#endif

static void *keep[10];

void *make_buffer(size_t n) { return malloc(n); }
void fill(int i) { keep[i] = make_buffer(SCALE * 1000 + i); }
char *leak_string(void) { return strdup("hello"); }

int main(void)
{
	for (int i = 0; i < 10; i++)
		fill(i);
	for (int i = 0; i < 5; i++)
		free(keep[i]);
	leak_string();
	void *big = malloc(1 << 20);
	free(big);
	return 0;
}
