/*
 * calls.c: a call-heavy program for memtrail run -stack-calls, built with
 * -finstrument-functions: naive Fibonacci, a function with a small frame,
 * four times (gcc drops the malloc-free pair around each): fib(N) to
 * fib(N-3), 66 million calls (132 million entries and returns) for
 * N = 35, the default 32 a quarter of that. What the function entry and
 * return hooks cost shows against the same binary run alone, whose hooks
 * are glibc's, which do nothing.
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static long fib(int n)
{
	volatile char pad[64];
	pad[0] = (char)n;
	if (n < 2)
		return n + pad[0] - (char)n;
	return fib(n - 1) + fib(n - 2);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 32;
	long sum = 0;
	for (int i = 0; i < 4; i++) {
		char *p = malloc(100 + (size_t)i);
		sum += fib(n - i);
		free(p);
	}
	printf("%ld\n", sum);
	return 0;
}
