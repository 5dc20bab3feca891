/* A program whose code says it comes from files that are not its source,
   as #line lets any program say: /etc/shadow, and a relative name, which a
   viewer must not look for in its own working directory. */
#include <stdlib.h>

#line 1 "/etc/shadow"
__attribute__((noinline)) static void *shadow_alloc(size_t n) { return malloc(n); }

#line 1 "relative-secret.c"
__attribute__((noinline)) static void *relative_alloc(size_t n) { return malloc(n); }

int main(void) {
	void *a = shadow_alloc(100), *b = relative_alloc(200);
	free(a);
	free(b);
	return 0;
}
