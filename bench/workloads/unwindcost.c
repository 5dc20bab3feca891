/*
 * unwindcost.c: the malloc-dense loop with a call-stack unwind before every
 * malloc and free, as a profiler would do, to price unwinders alone.
 * argv[1]: none, backtrace (glibc, _Unwind_Backtrace) or libunwind
 * (unw_backtrace with its global cache); argv[2]: allocations.
 */
#include <execinfo.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#define SLOTS 4096

static void *slots[SLOTS];
static void *frames[64];
static int mode;
static long sink;

static void unwind(void)
{
	switch (mode) {
	case 1:
		sink += backtrace(frames, 64);
		break;
#ifdef HAVE_LIBUNWIND
	case 2:
		sink += unw_backtrace(frames, 64);
		break;
#endif
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "backtrace") == 0)
		mode = 1;
	if (argc > 1 && strcmp(argv[1], "libunwind") == 0) {
#ifdef HAVE_LIBUNWIND
		unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_GLOBAL);
		mode = 2;
#else
		return 3;
#endif
	}
	long n = argc > 2 ? atol(argv[2]) : 16000000;
	uint64_t x = 88172645463325252ULL;
	for (long i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		unsigned slot = (unsigned)(x % SLOTS);
		unwind();
		free(slots[slot]);
		unwind();
		slots[slot] = malloc(8 + (size_t)((x >> 20) % 513));
	}
	return (int)(sink & 0);
}
