/*
 * A block carved from freed memory that the program never writes, kept to
 * exit, whose stale words still point to blocks the freed one held: for
 * memcheck those blocks are lost (it treats never-written memory as
 * undefined, and undefined words as no pointers), and so they must be for
 * memtrail. argv[1] says how the new block is made:
 *
 *   malloc   a malloc of the freed block's size, which glibc gives the
 *            freed block's memory;
 *   realloc  a small block grown by realloc into the freed block's place
 *            (glibc moves it there), so the stale words are in the tail
 *            that realloc adds;
 *   stack    no new block: the list's address is left all over the stack
 *            from 4 KiB below main's frame down, where the calls the
 *            agent makes at exit run (sigaction's, for one), which must
 *            not copy what they did not write into the agent's frame that
 *            is scanned, above. The 4 KiB right below main, where that
 *            frame lies, are cleared: slots of it that the agent never
 *            writes (padding) are another matter, not tested here.
 *
 * The freed block is too big for glibc's tcache, which realloc does not
 * use, and the blocks made after each of the two keep glibc from merging
 * them or growing them in place.
 *
 * The lost structure is a list of four 104-byte nodes, 416 bytes: one
 * definitely lost, three indirectly. The program prints nothing (stdio's
 * buffer would be one more block) but writes "reused" to stderr when the
 * new block has the freed one's address, as it must for the test to mean
 * anything (not under valgrind, whose allocator delays reuse).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct node {
	struct node *next;
	char pad[96];
};

/* The kept block, never written by the program. */
void *kept;

/* lose forgets p: the compiler cannot keep it anywhere. */
static void lose(void *volatile *p) { *p = NULL; }

#define HOLDER 1200

/* holder makes a block whose sixth word (past the two that glibc writes
 * into a freed block, and the three that realloc copies from the small
 * block) points to the list. */
static void **holder(void)
{
	void **a = malloc(HOLDER);
	memset(a, 0, HOLDER);
	struct node *head = NULL;
	for (int i = 0; i < 4; i++) {
		struct node *n = calloc(1, sizeof *n);
		n->next = head;
		head = n;
	}
	a[5] = head;
	a[100] = head->next; /* a second stale word, further in */
	return a;
}

/* clear_stack overwrites the stack below the caller's frame, where the
 * functions above left the addresses they handled. */
static void clear_stack(void)
{
	volatile char buf[16384];
	memset((char *)buf, 0, sizeof buf);
}

static void step(const char *how)
{
	void *small = malloc(8);
	memset(small, 0, 8);
	void *guard = malloc(16);
	void **a = holder();
	void *volatile old = a;
	free(a);
	a = NULL;
	if (strcmp(how, "realloc") == 0) {
		kept = realloc(small, HOLDER);
	} else {
		free(small);
		kept = malloc(HOLDER);
	}
	free(guard);
	if (kept == old)
		write(2, "reused\n", 7);
	lose(&old);
}

/* spray leaves the list's address in every word of the stack from 4 KiB
 * below the caller's frame down to 64 KiB, then loses it. */
static void spray(void)
{
	void **a = holder();
	volatile void *words[8192]; /* words[0] is the deepest */
	for (int i = 0; i < 8192; i++)
		words[i] = i < 8192 - 512 ? a[5] : NULL;
	(void)words;
	a[5] = a[100] = NULL;
	free(a);
}

int main(int argc, char **argv)
{
	const char *how = argc > 1 ? argv[1] : "malloc";
	if (strcmp(how, "stack") == 0) {
		spray();
		return 0;
	}
	step(how);
	clear_stack();
	return 0;
}
