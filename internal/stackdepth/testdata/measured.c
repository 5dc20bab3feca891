/*
 * measured.c: a program to record, whose stack the static bound and the
 * recording should agree on: main -> a -> b -> c, frames of known sizes,
 * with heap calls from main and from c (so that the recording's samples
 * tell the stack above main), and a deep recursion between heap events
 * that the bound cannot see.
 */
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

void *volatile sink;
volatile int result;

NOINLINE int c(int n)
{
	volatile char buf[512];
	buf[n & 511] = 1;
	sink = malloc(16);
	free(sink);
	return buf[0];
}

NOINLINE int b(int n)
{
	volatile char buf[1024];
	buf[n & 1023] = 1;
	return c(n) + buf[5];
}

NOINLINE int a(int n)
{
	volatile char buf[2048];
	buf[n & 2047] = 1;
	return b(n) + buf[7];
}

NOINLINE int recurse(int n)
{
	volatile char buf[256];
	buf[0] = (char)n;
	if (n <= 0)
		return buf[0];
	return recurse(n - 1) + buf[0];
}

int main(int argc, char **argv)
{
	(void)argv;
	sink = malloc(8);
	free(sink);
	int r = a(argc);
	if (argc > 1)
		r += recurse(100);
	result = r; /* the buffers' bytes are not set: r is not the exit status */
	return 0;
}
