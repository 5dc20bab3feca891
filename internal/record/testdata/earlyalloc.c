/*
 * earlyalloc: a library whose constructor allocates a block, as the
 * libraries chromium links do. Its call to malloc binds to the program's
 * own (ownmalloc.c built with -DEARLY), and the dynamic linker runs the
 * constructor before memtrail's agent's, which patches that malloc: the
 * block is never seen allocated, and the program frees it in main.
 */
#include <stdlib.h>

void *early_block;

__attribute__((constructor)) static void early(void) { early_block = malloc(48); }
