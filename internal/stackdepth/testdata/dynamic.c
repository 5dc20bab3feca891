/* dynamic.c: a frame whose size is known only at run time (alloca). */
#include <alloca.h>
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) int grow(int n)
{
	char *p = alloca(n);
	memset(p, n, n);
	return p[n / 2];
}

int main(int argc, char **argv)
{
	(void)argv;
	printf("%d\n", grow(argc * 100));
	return 0;
}
