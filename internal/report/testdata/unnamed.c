/*
 * unnamed.c: a program the tests strip, so that its frames have no
 * names, only addresses. Its deepest heap event is under two kinds of
 * repetition: ping and pong calling each other (distinct frames that
 * must be listed one by one) and self calling itself (one frame repeated,
 * which the report collapses into "x N"):
 *
 *   main -> ping -> pong -> ping -> pong -> self x 5 -> malloc
 */
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

void *volatile sink;

NOINLINE int self(int n)
{
	volatile char buf[64];
	buf[0] = (char)n;
	if (n > 1)
		return self(n - 1) + buf[0];
	sink = malloc(100);
	return buf[0];
}

NOINLINE int pong(int n);

NOINLINE int ping(int n)
{
	volatile char buf[32];
	buf[0] = (char)n;
	return (n > 0 ? pong(n - 1) : self(5)) + buf[0];
}

NOINLINE int pong(int n)
{
	volatile char buf[48];
	buf[0] = (char)n;
	return (n > 0 ? ping(n - 1) : self(5)) + buf[0];
}

int main(void)
{
	int r = ping(3);
	free(sink);
	return r & 0;
}
