/* helper.so.c: a library, stripped by the test, whose allocating
 * function has no symbol: its frames are known by object and offset. */
#include <stdlib.h>

static void *hidden_alloc(size_t n);

void *helper_alloc(size_t n) { return hidden_alloc(n); }

__attribute__((noinline)) static void *hidden_alloc(size_t n) { return malloc(n); }
