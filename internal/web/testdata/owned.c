/* A program whose source a second user owns: the test swaps this file for
   a link to a file of root's, once the program is recorded. */
#include <stdlib.h>

__attribute__((noinline)) static void *owned_alloc(size_t n) { return malloc(n); }

int main(void) {
	free(owned_alloc(64));
	return 0;
}
