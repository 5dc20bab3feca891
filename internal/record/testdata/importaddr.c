/*
 * Takes the addresses of malloc and free in code. Built with -fno-pic
 * -no-pie, the linker then makes the program's own PLT entries their
 * canonical addresses, which the dynamic linker gives for their names:
 * the program defines neither, and its calls reach the agent's hooks.
 */
#include <stdio.h>
#include <stdlib.h>

void *(*volatile alloc_fn)(size_t);
void (*volatile free_fn)(void *);

int main(void)
{
	alloc_fn = malloc;
	free_fn = free;
	for (int i = 0; i < 10; i++)
		free_fn(alloc_fn(100 + i));
	puts("done");
	return 0;
}
