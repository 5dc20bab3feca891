/*
 * chain.c: a program whose stack the tests know. Its functions hold
 * volatile arrays of known sizes, so that gcc -fstack-usage gives each
 * frame, and call one another in known ways:
 *
 *   main -> a -> b -> c          the deepest chain of direct calls
 *   main -> recurse -> recurse   a recursion (its depth is the argument)
 *   main -> call_pointer -> *f   a call through a function pointer
 *   main -> tail_caller -> tail_callee
 *                                a tail call when optimized (-O2): a jump
 *   main -> printf               a function of another library
 */
#include <stdio.h>

#define NOINLINE __attribute__((noinline, noclone))

volatile int sink;

NOINLINE int c(int n)
{
	volatile char buf[512];
	buf[0] = (char)n;
	buf[n & 511] = 1;
	return buf[0] + buf[3];
}

NOINLINE int b(int n)
{
	volatile char buf[1024];
	buf[0] = (char)n;
	buf[n & 1023] = 1;
	return c(n) + buf[5];
}

NOINLINE int a(int n)
{
	volatile char buf[2048];
	buf[0] = (char)n;
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

NOINLINE int callback(int n)
{
	volatile char buf[64];
	buf[0] = (char)n;
	return buf[0];
}

NOINLINE int call_pointer(int (*volatile f)(int), int n)
{
	volatile char buf[32];
	buf[0] = (char)n;
	return f(n) + buf[0];
}

NOINLINE int tail_callee(int n)
{
	volatile char buf[1000];
	buf[0] = (char)n;
	buf[n % 1000] = 1;
	return buf[0];
}

NOINLINE int tail_caller(int n)
{
	sink = n;
	return tail_callee(n + 1);
}

int main(int argc, char **argv)
{
	(void)argv;
	volatile char buf[128];
	buf[0] = (char)argc;
	int r = a(argc) + recurse(10 + argc) + call_pointer(callback, argc) + tail_caller(argc);
	printf("%d\n", r + buf[0]);
	return 0;
}
