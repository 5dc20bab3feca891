/*
 * staticalloc: a C++ program linked with an allocator library statically
 * (jemalloc's or tcmalloc's archive), whose malloc, free, operator new and
 * the rest are then the program's own, at addresses of the executable, as
 * in a server built that way. Its main makes every kind of call the agent
 * hooks, counts them, and prints at its end what memtrail must have
 * recorded from main: allocations, frees, bytes allocated, then the bytes
 * it left definitely lost and still reachable (see TestStaticAllocators).
 */
#include <cstdio>
#include <cstdlib>
#include <malloc.h>
#include <new>

void *volatile sink;
void *kept[8]; /* still reachable at exit */

static unsigned long allocs, frees, bytes;

static void *counted(void *p, size_t n)
{
	if (p == nullptr)
		abort();
	allocs++;
	bytes += n;
	sink = p;
	return p;
}

/* lose allocates a block and drops its only pointer. */
__attribute__((noinline)) static void lose(size_t n)
{
	sink = counted(malloc(n), n);
	sink = nullptr;
}

int main()
{
	for (size_t i = 0; i < 100; i++) {
		free(counted(malloc(16 + i), 16 + i));
		frees++;
	}
	for (size_t i = 0; i < 10; i++) {
		void *p = counted(calloc(4, 8 + i), 4 * (8 + i));
		void *q = realloc(p, 300 + i); /* a free and an allocation */
		frees++;
		free(counted(q, 300 + i));
		frees++;
	}
	void *p;
	if (posix_memalign(&p, 64, 100) != 0)
		abort();
	free(counted(p, 100));
	free(counted(aligned_alloc(128, 256), 256));
	free(counted(memalign(32, 48), 48));
	free(counted(valloc(64), 64));
	frees += 4;
	for (size_t i = 0; i < 20; i++) {
		int *one = static_cast<int *>(counted(new int(int(i)), sizeof(int)));
		delete one;
		int *many = static_cast<int *>(counted(new int[i + 1], (i + 1) * sizeof(int)));
		delete[] many;
		void *s = counted(::operator new(24 + i), 24 + i);
		::operator delete(s, 24 + i); /* sized */
		void *a = counted(::operator new(40, std::align_val_t(64)), 40);
		::operator delete(a, std::align_val_t(64));
		void *n = counted(::operator new(8, std::nothrow), 8);
		::operator delete(n);
		frees += 5;
	}
	unsigned long reachable = 0;
	for (size_t i = 0; i < 8; i++) {
		kept[i] = counted(malloc(1000 + i), 1000 + i);
		reachable += 1000 + i;
	}
	lose(777);
	std::printf("%lu %lu %lu %d %lu\n", allocs, frees, bytes, 777, reachable);
	return 0;
}
