/* Allocates at the end of a chain of calls compiled without frame
 * pointers, where rbp is an ordinary register holding data: only the
 * call-frame information can unwind through it. Built with -O2
 * -fomit-frame-pointer. */
#include <stdlib.h>

void *volatile sink;

__attribute__((noinline)) void *leaf(long n)
{
	/* Enough live values that the compiler uses every register, rbp too. */
	long a = n, b = n * 3, c = n ^ 7, d = n + 11, e = n * 5, f = n - 13, g = n * 17, h = n ^ 19;
	for (int i = 0; i < 3; i++) {
		a += b * c;
		b ^= d + e;
		c -= f * g;
		d += h ^ a;
		e *= (f | 1);
		f ^= g + h;
		g += a ^ b;
		h -= c + d;
	}
	sink = malloc((size_t)((a ^ b ^ c ^ d ^ e ^ f ^ g ^ h) & 63) + 1);
	return sink;
}

__attribute__((noinline)) void *middle(long n)
{
	char buf[200];
	for (int i = 0; i < 200; i++)
		buf[i] = (char)(n + i);
	void *p = leaf(n + buf[n & 127]);
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) void *outer(long n)
{
	void *p = middle(n * 2);
	__asm__ volatile("" ::: "memory");
	return p;
}

int main(int argc, char **argv)
{
	(void)argv;
	for (int i = 0; i < 10; i++)
		free(outer(argc + i));
	return 0;
}
