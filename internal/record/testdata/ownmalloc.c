/*
 * ownmalloc: a program that defines malloc, free, calloc and realloc
 * itself, on top of glibc's, as chromium's allocator shim does. The
 * executable exports them (libc's calls to malloc bind to them), so the
 * dynamic linker binds every call to them to the program's, not to
 * memtrail's agent. Its calloc calls its own malloc. It allocates
 * directly, and through libc: strdup, asprintf, fopen. With "fork", a
 * child process does the same.
 *
 * Built with -DREFUSED, its malloc begins with an instruction memtrail's
 * agent does not move (a zero extension, 0f b6), so its entry cannot be
 * patched. Built with -DCONDJUMP, it has a conditional jump in its first
 * five bytes, which the agent moves.
 *
 * Built with -DEARLY and linked with earlyalloc.c's library, main first
 * frees the block the library's constructor allocated.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_realloc(void *, size_t);

/* Not inlined, as the functions of an allocator shim in a file of its own
 * are not: a call inlined into its caller never enters malloc. */
#define SHIM __attribute__((noinline))

/* Calls counted by the prologues below, which main checks. */
unsigned long malloc_calls, free_calls;
void note_free(void) { free_calls++; }

#if defined(PROLOGUES)
/* Built with -DPROLOGUES, malloc and free begin as chromium's do, with
 * instructions the agent moves and fixes up: malloc loads a variable
 * relative to its own address, free (as built for CET) calls a
 * function. */
__asm__(".globl malloc\n.type malloc,@function\nmalloc:\n"
	"\tpush %rbp\n\tmov %rsp,%rbp\n\tmov malloc_calls(%rip),%rax\n"
	"\tadd $1,%rax\n\tmov %rax,malloc_calls(%rip)\n\tpop %rbp\n\tjmp __libc_malloc@PLT\n"
	".size malloc,.-malloc\n");
__asm__(".globl free\n.type free,@function\nfree:\n"
	"\tendbr64\n\tpush %rdi\n\tcall note_free\n\tpop %rdi\n\tjmp __libc_free@PLT\n"
	".size free,.-free\n");
#elif defined(CONDJUMP)
/* malloc(0) is malloc(1). */
__asm__(".globl malloc\n.type malloc,@function\nmalloc:\n"
	"\ttest %rdi,%rdi\n\tjne 1f\n\tmov $1,%edi\n1:\taddq $1,malloc_calls(%rip)\n"
	"\tjmp __libc_malloc@PLT\n"
	".size malloc,.-malloc\n");
#elif defined(REFUSED)
/* The zero extension only fills %eax, which the call's result replaces. */
__asm__(".globl malloc\n.type malloc,@function\nmalloc:\n"
	"\tmovzbl %dil,%eax\n\taddq $1,malloc_calls(%rip)\n"
	"\tjmp __libc_malloc@PLT\n"
	".size malloc,.-malloc\n");
#else
SHIM void *malloc(size_t n)
{
	malloc_calls++;
	return __libc_malloc(n);
}
#endif
#if !defined(PROLOGUES)
SHIM void free(void *p)
{
	free_calls++;
	__libc_free(p);
}
#endif
SHIM void *calloc(size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total))
		return NULL;
	void *p = malloc(total);
	if (p != NULL)
		memset(p, 0, total);
	return p;
}
SHIM void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }

static void work(void)
{
	char *direct = malloc(100);
	char *zeroed = calloc(4, 8);
	direct = realloc(direct, 200);
	char *copy = strdup("made by libc");
	char *printed;
	if (asprintf(&printed, "%s %d", copy, 42) < 0)
		exit(1);
	FILE *f = fopen("/proc/self/stat", "r");
	if (f != NULL) {
		char line[64];
		if (fgets(line, sizeof line, f) == NULL)
			line[0] = 0;
		fclose(f);
	}
	free(printed);
	free(copy);
	free(zeroed);
	free(direct);
}

#if defined(EARLY)
extern void *early_block;
#endif

int main(int argc, char **argv)
{
#if defined(EARLY)
	free(early_block);
#endif
	work();
	if (argc > 1 && strcmp(argv[1], "fork") == 0) {
		pid_t child = fork();
		if (child == 0) {
			work();
			_exit(0);
		}
		waitpid(child, NULL, 0);
	}
	/* The program's own functions ran, and read and wrote their counts. */
	return malloc_calls > 0 && free_calls > 0 ? 0 : 2;
}
