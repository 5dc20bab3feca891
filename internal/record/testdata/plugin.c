/* A library loaded and unloaded at run time. */
#include <stdlib.h>

__attribute__((noinline)) void *plugin_alloc(size_t n) { return malloc(n); }
