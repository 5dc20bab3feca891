/*
 * ownnew: a C++ program that defines its allocator as chromium does: one
 * function is free, operator delete and operator delete[]; one is
 * operator new and operator new[]; sized delete is one more. Each counts
 * the calls it serves, libc's on the program's behalf among them, and the
 * program prints the counts at its end: what memtrail must have recorded.
 * Its operator new throws std::bad_alloc through memtrail's hook, which
 * the program catches before it allocates on: the exception object,
 * allocated inside operator new, is not recorded (see TestOwnOperators).
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <unistd.h>
#include <vector>

extern "C" {
void *__libc_malloc(size_t);
void __libc_free(void *);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
}

static unsigned long allocs, frees;

extern "C" {
__attribute__((noinline)) void *malloc(size_t n)
{
	void *p = __libc_malloc(n);
	allocs += p != NULL;
	return p;
}
__attribute__((noinline)) void free(void *p)
{
	frees += p != NULL;
	__libc_free(p);
}
__attribute__((noinline)) void *calloc(size_t n, size_t size)
{
	void *p = __libc_calloc(n, size);
	allocs += p != NULL;
	return p;
}
__attribute__((noinline)) void *realloc(void *old, size_t n)
{
	/* Counted as valgrind counts it: a block made, one released. glibc's
	 * realloc(old, 0) frees old and returns NULL. */
	void *p = __libc_realloc(old, n);
	allocs += p != NULL;
	frees += old != NULL && (p != NULL || n == 0);
	return p;
}
}

__attribute__((noinline)) void *operator new(size_t n)
{
	void *p = __libc_malloc(n ? n : 1);
	if (p == NULL)
		throw std::bad_alloc();
	allocs++;
	return p;
}
void *operator new[](size_t n) __attribute__((alias("_Znwm")));
void operator delete(void *p) noexcept __attribute__((alias("free")));
void operator delete[](void *p) noexcept __attribute__((alias("free")));
__attribute__((noinline)) void operator delete(void *p, size_t) noexcept
{
	frees += p != NULL;
	__libc_free(p);
}
void operator delete[](void *p, size_t) noexcept __attribute__((alias("_ZdlPvm")));

struct node {
	node *next;
	int value;
};

int main()
{
	/* What libstdc++ allocated before memtrail's agent started is not
	 * recorded (its emergency exception pool). */
	allocs = frees = 0;
	std::vector<std::string> words;
	for (int i = 0; i < 50; i++)
		words.push_back(std::string(40, 'a' + i % 26));
	node *list = nullptr;
	for (int i = 0; i < 20; i++)
		list = new node{list, i};
	int *array = new int[100];
	char *copy = strdup("made by libc");
	void *block = malloc(64);
	block = realloc(block, 4096);
	try {
		volatile size_t huge = (size_t)1 << 62;
		void *p = operator new(huge);
		operator delete(p);
	} catch (const std::bad_alloc &) {
	}
	/* Allocations after the throw are recorded as before it. */
	while (list != nullptr) {
		node *next = list->next;
		delete list;
		list = next;
	}
	delete[] array;
	free(copy);
	free(block);
	words.clear();
	words.shrink_to_fit();
	for (int i = 0; i < 10; i++)
		delete new node{nullptr, i};
	char line[64];
	int n = snprintf(line, sizeof line, "%lu %lu\n", allocs, frees);
	if (write(1, line, (size_t)n) != n)
		return 1;
	return 0;
}
