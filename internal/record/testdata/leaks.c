/*
 * Blocks left at exit in each of memcheck's four leak classes, in the
 * way argv[1] says; argv[2] is a count for "many". The program prints
 * nothing (stdio's buffer would be one more block) and clears the stack
 * it used below main's frame before it returns, so that neither memtrail
 * nor valgrind finds a stale pointer there: what is reachable is only
 * what the program means to keep.
 *
 * Sizes are distinct so that a wrong class shows in the bytes.
 */
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

struct node {
	struct node *next;
	char pad[24];
};

void *kept_by_global;
char *kept_by_interior;
struct node *tree_root;

/* lose forgets p: the compiler cannot keep it anywhere. */
static void lose(void *volatile *p) { *p = NULL; }

static struct node *list(int n, size_t size)
{
	struct node *head = NULL;
	for (int i = 0; i < n; i++) {
		struct node *b = calloc(1, size);
		b->next = head;
		head = b;
	}
	return head;
}

/* A singly linked list whose head pointer is overwritten: the head is
 * definitely lost, the other nodes indirectly. */
static void lost_list(void)
{
	void *volatile head = list(4, 40);
	lose(&head);
}

/* A list whose head is freed while it still points to the rest, which
 * is lost then: the second node definitely, the others indirectly. The
 * free of the head made the leak (memtrail run -leak-origins). */
static void freed_head(void)
{
	struct node *head = list(4, 40);
	free(head); /* the leak is made here */
}

/* An array of 300 pointers to blocks, freed while it still points to
 * them: each block is definitely lost, and the free of the array made
 * the leak (more pointers than one record of the agent holds). */
static void freed_array(void)
{
	void **array = calloc(300, sizeof *array);
	for (int i = 0; i < 300; i++)
		array[i] = calloc(1, 24);
	free(array); /* the array's leak is made here */
}

/* Two blocks pointing at each other, nothing else at them: one is
 * definitely lost, the other indirectly. */
static void lost_cycle(void)
{
	struct node *a = calloc(1, 48), *b = calloc(1, 56);
	a->next = b;
	b->next = a;
	void *volatile p = a, *volatile q = b;
	a = b = NULL;
	lose(&p);
	lose(&q);
}

/* A block only a global points to, and a lost one it points to:
 * still reachable, both. */
static void global(void)
{
	struct node *b = calloc(1, 64);
	b->next = calloc(1, 72);
	kept_by_global = b;
}

/* A block kept only by a pointer into its middle: possibly lost, and
 * so is the block it points to (a start pointer from a possibly lost
 * block makes no more than possibly lost). Offset 40 is not one of
 * memcheck's heuristics (they look at offsets 8 and 24). */
static void interior(void)
{
	struct node *b = calloc(1, 100);
	b->next = calloc(1, 88);
	kept_by_interior = (char *)b + 40;
}

/* A tree under a global: every block still reachable. */
static void tree(void)
{
	tree_root = list(3, 32);
	tree_root->next->next->next = list(2, 120);
}

/* n small blocks linked from a global: a scan of many blocks. */
static void many(int n)
{
	tree_root = list(n, 16);
}

void **kept_array;

/* Blocks bigger than the scan reads at once: a reachable array of 3 MiB
 * holding start pointers to 2000 blocks, pointers 8 bytes into 500 more
 * (zeroed, so no heuristic takes them: possibly lost) and one 20000 bytes
 * into a block of 64 KiB, far past its first page (possibly lost); and a
 * lost block of 2 MiB holding the only pointers to 100 blocks (indirectly
 * lost). */
static void windows(void)
{
	size_t n = (3 << 20) / sizeof(void *);
	kept_array = calloc(n, sizeof(void *));
	for (size_t i = 0; i < 2000; i++)
		kept_array[i * 100] = malloc(24);
	for (size_t i = 0; i < 500; i++)
		kept_array[n - 1 - i * 50] = (char *)calloc(1, 40) + 8;
	kept_array[n / 2] = (char *)malloc(64 << 10) + 20000;
	void **lost = calloc((2 << 20) / sizeof(void *), sizeof(void *));
	for (size_t i = 0; i < 100; i++)
		lost[i * 2000] = malloc(32);
	void *volatile l = lost;
	lost = NULL;
	lose(&l);
}

void *kept_big;

/* A block kept only by a pointer in an anonymous mapping of the program's
 * that lies right before the mapping malloc made for a big block: the
 * kernel merges the two into one, and the program's part is a root all
 * the same. Both blocks are still reachable. */
static void merged(void)
{
	char *big = malloc(1 << 20);
	uintptr_t before = (uintptr_t)big - 16 - 4096;
	void **mine = mmap((void *)before, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (mine == MAP_FAILED || (uintptr_t)mine != before)
		exit(2);
	mine[0] = calloc(1, 200);
	kept_big = big;
}

/* bury allocates a block 20 frames of 1 KiB below its caller and keeps
 * its address only in a local there, which stays in the stack's memory,
 * below the stack pointer, once the calls return: stale, no root. */
static __attribute__((noinline)) void bury(int depth)
{
	volatile char pad[1024];
	pad[0] = (char)depth;
	if (depth > 0) {
		bury(depth - 1);
		return;
	}
	void *volatile p = calloc(1, 176);
	(void)p;
}

static sem_t parked;

/* A thread that keeps a block in a local of its own frame while it waits
 * at exit (still reachable: its stack is a root from its stack pointer
 * up), after burying another one (definitely lost: below its stack
 * pointer). */
static void *waiter(void *arg)
{
	(void)arg;
	bury(20);
	void *volatile kept = calloc(1, 168);
	sem_post(&parked);
	for (;;)
		pause();
	return kept;
}

/* threads leaves a thread waiting at exit (see waiter). */
static void threads(void)
{
	pthread_t t;
	sem_init(&parked, 0, 0);
	pthread_create(&t, NULL, waiter, NULL);
	sem_wait(&parked);
}

static void on_urg(int sig)
{
	(void)sig;
	static const char msg[] = "leaks: SIGURG handled\n";
	(void)!write(2, msg, sizeof msg - 1);
}

/* threads, in a program that handles SIGURG itself: memtrail must stop
 * the thread with another signal, and the handler must not run. */
static void threads_urg(void)
{
	signal(SIGURG, on_urg);
	threads();
}

/* threads, with the waiting thread blocking every signal: memtrail
 * cannot stop it, and the program must still exit. */
static void threads_masked(void)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* the thread inherits it */
	threads();
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* clear_stack overwrites the stack below the caller's frame, where the
 * functions above left the addresses they handled. */
static void clear_stack(void)
{
	volatile char buf[16384];
	memset((char *)buf, 0, sizeof buf);
}

/* Lists whose nodes lie in random order of address, as a program that
 * allocates and frees a while leaves them: a scan following one reads a
 * block at a time, in no order. shuffled makes four of SHUFFLED nodes
 * each: one kept by a global (still reachable), one kept only by a
 * pointer into its head's interior (possibly lost), a lost list and a
 * lost ring (one definitely lost, the others indirectly). */
#define SHUFFLED 2000
struct node *shuffled_head;
char *shuffled_inner;

static struct node *link_nodes(struct node **v, int n, int ring)
{
	for (int i = 0; i + 1 < n; i++)
		v[i]->next = v[i + 1];
	v[n - 1]->next = ring ? v[0] : NULL;
	return v[0];
}

static void shuffled(void)
{
	struct node **v = malloc(4 * SHUFFLED * sizeof *v);
	for (int i = 0; i < 4 * SHUFFLED; i++)
		v[i] = calloc(1, sizeof(struct node));
	unsigned long r = 12345;
	for (int i = 4 * SHUFFLED - 1; i > 0; i--) {
		r = r * 6364136223846793005UL + 1442695040888963407UL;
		int j = (int)((r >> 33) % (unsigned long)(i + 1));
		struct node *t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
	shuffled_head = link_nodes(v, SHUFFLED, 0);
	shuffled_inner = (char *)link_nodes(v + SHUFFLED, SHUFFLED, 0) + 8;
	void *volatile lost = link_nodes(v + 2 * SHUFFLED, SHUFFLED, 0);
	lose(&lost);
	lost = link_nodes(v + 3 * SHUFFLED, SHUFFLED, 1);
	lose(&lost);
	free(v);
}

int main(int argc, char **argv)
{
	const char *how = argc > 1 ? argv[1] : "mix";
	/* A local of main's frame, alive at exit: still reachable. */
	struct node *volatile local = NULL;
	void *scratch = malloc(10);
	free(scratch);
	if (strcmp(how, "list") == 0)
		lost_list();
	else if (strcmp(how, "merged") == 0)
		merged();
	else if (strcmp(how, "threads") == 0)
		threads();
	else if (strcmp(how, "threads_urg") == 0)
		threads_urg();
	else if (strcmp(how, "threads_masked") == 0)
		threads_masked();
	else if (strcmp(how, "freed_array") == 0)
		freed_array();
	else if (strcmp(how, "freed_head") == 0)
		freed_head();
	else if (strcmp(how, "cycle") == 0)
		lost_cycle();
	else if (strcmp(how, "global") == 0)
		global();
	else if (strcmp(how, "interior") == 0)
		interior();
	else if (strcmp(how, "stack") == 0)
		local = list(2, 136);
	else if (strcmp(how, "tree") == 0)
		tree();
	else if (strcmp(how, "windows") == 0)
		windows();
	else if (strcmp(how, "shuffled") == 0)
		shuffled();
	else if (strcmp(how, "many") == 0)
		many(argc > 2 ? atoi(argv[2]) : 1000000);
	else if (strcmp(how, "none") == 0)
		;
	else { /* mix: every class at once, and lost blocks pointing at kept ones */
		lost_list();
		lost_cycle();
		global();
		interior();
		tree();
		local = list(1, 144);
		struct node *lost = calloc(1, 152);
		lost->next = local; /* a lost block pointing at a kept one */
		void *volatile l = lost;
		lost = NULL;
		lose(&l);
	}
	clear_stack();
	/* exit, not return: main's frame, and so local, is alive at exit. */
	exit(local != NULL && local->pad[0] != 0);
}
