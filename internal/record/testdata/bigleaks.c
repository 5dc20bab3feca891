/*
 * bigleaks.c: a big heap left at exit in all four of memcheck's leak
 * classes, in the shapes real programs leave them, to check the leak
 * scan's classes against valgrind's on a million blocks and more.
 *
 *	bigleaks KEYS TREE LISTS LIST_LEN RINGS RING_LEN INTERIOR
 *
 * Step by step, each shape allocated after the ones before it freed
 * blocks, so that the later ones reuse their holes and the heap's address
 * order is not the allocation order:
 *
 *  1. A hash table under a global: BUCKETS bucket heads, KEYS entries of
 *     24 + 8*(key%4) bytes chained in them, then every key divisible by 3
 *     deleted (freed). Still reachable: the bucket array and the entries
 *     left.
 *  2. A binary search tree under a global: TREE nodes of 32 bytes, keys
 *     in a scrambled order so that it is bushy. Still reachable.
 *  3. LISTS singly linked lists of LIST_LEN nodes, node g (counted over
 *     all lists) of 40 + 8*(g%3) bytes, their heads dropped: each head
 *     definitely lost, the rest indirectly. At the end, in every tenth
 *     list (0, 10, ...) the node at LIST_LEN/2 is freed while its
 *     predecessor still points to it: the node after it is definitely
 *     lost then too (nothing is allocated after, so the dangling pointer
 *     never meets a new block).
 *  4. RINGS cycles of RING_LEN nodes of 56 bytes, nothing else pointing
 *     at them: one node of each definitely lost, the rest indirectly.
 *  5. INTERIOR blocks of 72 bytes kept only by a pointer 40 bytes into
 *     them (not an offset any of memcheck's heuristics looks at, and the
 *     blocks are zero) from a global array: possibly lost; the array is
 *     still reachable.
 *
 * The program prints nothing (stdio's buffer would be one more block) and
 * clears the stack below main's frame before it exits, so that no stale
 * address keeps a lost block.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 65536

struct entry {
	struct entry *next;
	uint64_t key;
	uint64_t value;
	/* and 0 to 3 more words, by key */
};

struct tnode {
	struct tnode *left, *right;
	uint64_t key, value;
};

struct lnode {
	struct lnode *next;
	/* and 32 to 48 more bytes */
};

struct entry **table;
struct tnode *tree_root;
char **interior;

static void *must(void *p)
{
	if (!p) {
		fputs("bigleaks: out of memory\n", stderr);
		exit(1);
	}
	return p;
}

/* lose forgets p: the compiler cannot keep it anywhere. */
static void lose(void *volatile *p) { *p = NULL; }

/* scramble spreads i over 64 bits (splitmix64's finalizer). */
static uint64_t scramble(uint64_t i)
{
	i += 0x9e3779b97f4a7c15ULL;
	i = (i ^ (i >> 30)) * 0xbf58476d1ce4e5b9ULL;
	i = (i ^ (i >> 27)) * 0x94d049bb133111ebULL;
	return i ^ (i >> 31);
}

static __attribute__((noinline)) void hash_table(long keys)
{
	table = must(calloc(BUCKETS, sizeof *table));
	for (long k = 0; k < keys; k++) {
		struct entry *e = must(calloc(1, 24 + 8 * (size_t)(k % 4)));
		e->key = (uint64_t)k;
		struct entry **b = &table[scramble((uint64_t)k) % BUCKETS];
		e->next = *b;
		*b = e;
	}
	for (long k = 0; k < keys; k += 3) {
		struct entry **p = &table[scramble((uint64_t)k) % BUCKETS];
		while ((*p)->key != (uint64_t)k)
			p = &(*p)->next;
		struct entry *e = *p;
		*p = e->next;
		free(e);
	}
}

static __attribute__((noinline)) void tree(long nodes)
{
	for (long i = 0; i < nodes; i++) {
		struct tnode *n = must(calloc(1, sizeof *n));
		n->key = scramble((uint64_t)i);
		struct tnode **p = &tree_root;
		while (*p)
			p = n->key < (*p)->key ? &(*p)->left : &(*p)->right;
		*p = n;
	}
}

/* lists builds them and returns an array of their heads, which the
 * caller frees once it has cut every tenth list in the middle. */
static __attribute__((noinline)) struct lnode **lists(long count, long len)
{
	struct lnode **heads = must(calloc((size_t)count, sizeof *heads));
	long g = 0;
	for (long l = 0; l < count; l++) {
		struct lnode **tail = &heads[l];
		for (long j = 0; j < len; j++, g++) {
			struct lnode *n = must(calloc(1, 40 + 8 * (size_t)(g % 3)));
			*tail = n;
			tail = &n->next;
		}
	}
	return heads;
}

static __attribute__((noinline)) void cut_lists(struct lnode **heads, long count, long len)
{
	for (long l = 0; l < count; l += 10) {
		struct lnode *n = heads[l];
		for (long j = 0; j < len / 2; j++)
			n = n->next;
		free(n); /* its predecessor still points here */
	}
	memset(heads, 0, (size_t)count * sizeof *heads);
	free(heads);
}

static __attribute__((noinline)) void rings(long count, long len)
{
	for (long r = 0; r < count; r++) {
		struct lnode *first = must(calloc(1, 56)), *last = first;
		for (long j = 1; j < len; j++) {
			struct lnode *n = must(calloc(1, 56));
			last->next = n;
			last = n;
		}
		last->next = first;
		void *volatile p = first, *volatile q = last;
		first = last = NULL;
		lose(&p);
		lose(&q);
	}
}

static __attribute__((noinline)) void interiors(long count)
{
	interior = must(calloc((size_t)count, sizeof *interior));
	for (long i = 0; i < count; i++)
		interior[i] = (char *)must(calloc(1, 72)) + 40;
}

/* clear_stack overwrites the stack below the caller's frame, where the
 * functions above left the addresses they handled. */
static __attribute__((noinline)) void clear_stack(void)
{
	volatile char buf[65536];
	memset((char *)buf, 0, sizeof buf);
}

int main(int argc, char **argv)
{
	if (argc != 8) {
		fputs("usage: bigleaks KEYS TREE LISTS LIST_LEN RINGS RING_LEN INTERIOR\n", stderr);
		return 2;
	}
	long n[7];
	for (int i = 0; i < 7; i++) {
		char *end;
		n[i] = strtol(argv[i + 1], &end, 10);
		if (*end || n[i] < 1 || n[i] > 100000000) {
			fprintf(stderr, "bigleaks: %s: need a count from 1 to 100000000\n", argv[i + 1]);
			return 2;
		}
	}
	if (n[3] < 3 || n[5] < 2) {
		fputs("bigleaks: a list needs 3 nodes to be cut, a ring 2\n", stderr);
		return 2;
	}
	hash_table(n[0]);
	tree(n[1]);
	struct lnode **heads = lists(n[2], n[3]);
	rings(n[4], n[5]);
	interiors(n[6]);
	cut_lists(heads, n[2], n[3]);
	heads = NULL;
	clear_stack();
	exit(0);
}
