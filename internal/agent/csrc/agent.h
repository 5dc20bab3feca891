/*
 * agent.h: declarations shared by the agent's C files.
 *
 * The agent is preloaded into the recorded program. It never allocates
 * through the heap it traces: its own memory comes from mmap (arena.c), and
 * every path that may call into libc's allocator runs with the thread's
 * busy flag set, so the nested calls pass through unrecorded.
 */
#ifndef MEMTRAIL_AGENT_H
#define MEMTRAIL_AGENT_H

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

#define MT_HIDDEN __attribute__((visibility("hidden")))
#define MT_LIKELY(x) __builtin_expect(!!(x), 1)
#define MT_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* For the steps of the allocator hooks' fast path: left to itself, the
 * compiler inlines them in some hooks and calls them in others, as the
 * hooks' code grows, and a call costs the hook more than the step. */
#define MT_HOT static inline __attribute__((always_inline))

/* How far ahead of a record mt_put asks for the ring's line: a few
 * records, so that the line is there by the time they are written. */
#define MT_PREFETCH_WORDS 32

/* The most frames one unwind goes through: the recorded ones, and beyond
 * the depth limit as many again, counted (see mt_capture_stack). */
#define MT_WALK_LIMIT (2 * MT_MAX_FRAMES_LIMIT)

/* A frame of a thread's last stack: its return address, the stack
 * pointer in that frame, its module slot, and the node naming the stack
 * from it outwards (recorded frames only); and what else its unwind read
 * (see mt_outer_unchanged): rbp in that frame, whether it
 * mattered, where it was loaded from (the slot k at sp - 8k, 0: the inner
 * frame's), and the address the CFA was loaded from (0: none). Side by
 * side, so that checking a frame reads one or two cache lines rather than
 * one per field. check is where the frame's words are in the thread's
 * list (see mt_thread.listed): the number of words the frames outside it
 * read. */
struct mt_frame {
	uintptr_t ra, sp, bp, cfa_at;
	uint32_t mod, node;
	uint8_t bp_used, bp_slot;
	uint32_t check;
};

/* A word an unwind read from the stack, and what it held: the frames of
 * the last stack as mt_capture_stack checks them (see mt_list). */
struct mt_check {
	const uintptr_t *at;
	uintptr_t v;
};

/* A frame of the stack being unwound: as struct mt_frame, with its rule;
 * cfa_at and bp_slot say how the frame got its CFA and rbp. */
struct mt_new_frame {
	uintptr_t ra, sp, bp, cfa_at;
	uint64_t rule;
	uint32_t mod;
	uint8_t bp_slot;
};

/* The most words listed for a thread's check of its outer frames (see
 * mt_outer_unchanged): a frame reads one word, or two or three, so a
 * stack of 2,048 frames fits unless its frames are realigned or keep rbp.
 * A bound, so that a thread's state stays below the size the arena gives
 * a mapping of its own (arena.c): the leak scan leaves out only so many
 * of the agent's mappings. */
#define MT_CHECK_WORDS 2048

/* Per-thread state, allocated from the arena on a thread's first event. */
struct mt_thread {
	/* gen and busy side by side, so that mt_enter asks both, and the
	 * process's state, in one compare (see mt_process.enter_key). */
	union {
		struct {
			uint32_t gen;  /* process generation it was set up in */
			uint32_t busy; /* inside the agent: nested allocator calls pass through */
		};
		uint64_t gen_busy;
	};
	uint32_t internal; /* the agent itself is calling libc, which may allocate */
	uint32_t slot;     /* index of its ring slot */
	uint32_t modgen;   /* module generation of the cached stack */
	uint32_t depth;    /* frames in the cached stack (see mt_stack_cut) */
	uint32_t uncounted; /* it was cut, and more frames than depth: their number is not known */
	/* The cached stack's innermost frame when mt_capture_stack may reuse
	 * the stack whole from it, else NULL (see mt_capture_walk); and the
	 * stack in use at its stack pointer, which such a reuse takes. */
	const struct mt_frame *top;
	uint64_t top_use;
	/* The first frame of the cached stack whose words are not in check
	 * (see mt_outer_unchanged), and the end of the words the frames
	 * before it read. The innermost frame is never listed: no frame is
	 * inside it. */
	const struct mt_frame *listed;
	struct mt_check *check_end;
	uintptr_t tp; /* the thread pointer of the thread it is the state of (see mt_self) */
	uint64_t tid;
	uintptr_t stack_lo, stack_hi; /* bounds of the thread's stack; stack_hi is its base */
	uintptr_t paint_lo, paint_hi; /* the part of it painted (stackuse.c) */
	uint32_t stack_grows; /* the main thread's: its mapping grows down to stack_lo */
	uint64_t stack_use;  /* bytes of stack in use at the event being recorded; 0 unknown */
	/* The tsc and stack in use of the latest ALLOC or FREE record in the
	 * thread's ring (same_tsc ~0 before the first): an allocation or free
	 * that has both the same is written short (ALLOC_SAME, FREE_SAME). */
	uint64_t same_tsc, same_use;
	uint64_t *ring;    /* ring data of its slot */
	struct mt_slot *ctl;
	uint64_t ring_mask; /* ring size in bytes - 1 */
	uint64_t ring_limit; /* write position up to which the ring is known free */
	uint32_t stack_id;  /* the stack of the event being recorded */
	uint64_t fork_seq;  /* sequence number of a fork in progress, + 1 */
	uint32_t in_seq;    /* taking a number as the sole thread (see mt_seq_of) */
	struct mt_thread *next_free;
	/* Function entries and returns (calls.c): the current window's
	 * end, latest call time, deepest and latest stack in use and calls;
	 * the deepest entry so far, when, and whether its stack is still to
	 * be taken. */
	uint64_t calls_until, calls_last, calls_max, calls_level, calls_n;
	uint64_t deep_bytes, deep_time;
	uint32_t deep_pending;
	/* The last stack, outermost first (see struct mt_frame). A cut
	 * stack keeps the frames beyond the cut too, those it counted, so
	 * that a stack reusing its outer part knows them. */
	struct mt_frame frame[MT_WALK_LIMIT];
	/* Nodes this thread interned lately, direct-mapped by hash: most
	 * lookups end here, without touching the shared table. */
	struct {
		uint32_t parent, module, id, pad;
		uint64_t offset;
	} recent[256];
	/* Scratch for the stack being unwound, innermost first; one more
	 * entry for the frame the walk stopped at. */
	struct mt_new_frame new_frame[MT_WALK_LIMIT + 1];
	/* The words each frame of the last stack read, outermost first
	 * (see struct mt_frame's check): its return address, and its rbp
	 * and its CFA where they were loaded from the stack and mattered.
	 * As many as MT_CHECK_WORDS: the frames beyond are checked one by
	 * one. */
	struct mt_check check[MT_CHECK_WORDS];
	/* A statically linked program a vfork child of this thread exec'd
	 * (exec.c): the child notes its pid and the program here before
	 * its exec, and takes them back if the exec fails; it sets gen
	 * apart from the process's too, so that the thread's first entry
	 * into the agent after vfork returns, which then takes the slow
	 * path, tells the recorder (mt_spawn_flush). */
	uint32_t spawn_pid;
	uint32_t spawn_len;
	char spawn_path[MT_EXEC_PATH];
	/* Calling the program's own allocation function (entrypatch.c): where
	 * the call's return address is, and what it is while the call runs.
	 * Last, out of the hooks' way. */
	uintptr_t *own_slot;
	uintptr_t own_ret;
};

/* Process-wide state. */
struct mt_process {
	int state; /* MT_STATE_* */
	uint32_t gen;
	/* What a thread's gen_busy holds when mt_enter may take the fast
	 * path: gen, not busy, while the state is active; while it is not,
	 * MT_ENTER_NONE, which no thread's holds (busy is 0 or 1). Set with
	 * state (set_state in process.c). */
	uint64_t enter_key;
	pid_t pid;
	struct mt_header *hdr;
	uint8_t *region;
	uint64_t region_size;
	struct mt_slot *slots;
	uint8_t *rings;
	struct mt_node *nodes;
	uint32_t max_frames;
	char sock_path[108];
	size_t sock_path_len;
	char key[MT_KEY_LEN];
	char sock_env[MT_KEY_LEN + 1 + 108]; /* MEMTRAIL_SOCK as the environment gave it */
	/* The thread that takes sequence numbers without a locked
	 * instruction (see mt_seq_of): 0 until a thread attaches, then that
	 * thread's state while it is the only one attached, MT_SEQ_SHARED
	 * from when a second one attaches (or membarrier is not there). */
	uintptr_t seq_owner;
	int membarrier_ok; /* registered for MEMBARRIER_CMD_PRIVATE_EXPEDITED */
	int prefetchw;     /* the CPU has PREFETCHW (see mt_publish) */
};
#define MT_SEQ_SHARED ((uintptr_t)1)
#define MT_ENTER_NONE (~(uint64_t)0)

enum { MT_STATE_UNINIT, MT_STATE_ACTIVE, MT_STATE_OFF };

extern struct mt_process mt_proc MT_HIDDEN;

/* mt_stack_cut reports whether t's cached stack is deeper than the depth
 * limit: then only its innermost max_frames frames are in the trace. */
static inline int mt_stack_cut(const struct mt_thread *t) { return t->depth > mt_proc.max_frames; }

/* arena.c: memory for the agent itself, straight from mmap. */
MT_HIDDEN void *mt_arena_alloc(size_t size);
MT_HIDDEN void *mt_map(size_t size);
#define MT_MAX_MAPS 44 /* a SCAN record holds them */
struct mt_mapping {
	uintptr_t addr, size;
};
extern struct mt_mapping mt_maps[MT_MAX_MAPS] MT_HIDDEN;
extern uint32_t mt_nmaps MT_HIDDEN;

/* real.c: the allocator functions the agent wraps. */
struct mt_real {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	int (*dlclose)(void *);
	void (*_exit)(int) __attribute__((noreturn));
	void (*_Exit)(int) __attribute__((noreturn));
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	int (*fexecve)(int, char *const[], char *const[]);
	int (*posix_spawn)(pid_t *, const char *, const void *, const void *, char *const[], char *const[]);
	int (*posix_spawnp)(pid_t *, const char *, const void *, const void *, char *const[], char *const[]);
	int (*system)(const char *);
	void *(*popen)(const char *, const char *);
};
extern struct mt_real mt_real MT_HIDDEN;
MT_HIDDEN void mt_resolve(void);
MT_HIDDEN void mt_usable_setup(void);
#define MT_BOOTSTRAP_SIZE (256 << 10)
extern uint8_t mt_bootstrap[MT_BOOTSTRAP_SIZE] MT_HIDDEN;
/* mt_in_bootstrap reports whether p is a block of the bootstrap buffer
 * (real.c), which the real allocator never saw. */
static inline int mt_in_bootstrap(const void *p)
{
	return (uintptr_t)p - (uintptr_t)mt_bootstrap < MT_BOOTSTRAP_SIZE;
}
MT_HIDDEN void *mt_bootstrap_alloc(size_t size, size_t align);
MT_HIDDEN size_t mt_bootstrap_size(const void *p);

/* process.c: connecting to the recorder, threads, rings. The hot paths
 * are inline here; what they rarely need stays out of line. */
extern pthread_key_t mt_thread_key MT_HIDDEN;
MT_HIDDEN struct mt_thread *mt_enter_slow(struct mt_thread *t, const void *hook_frame);
MT_HIDDEN struct mt_thread *mt_enter_miss(const void *hook_frame);
MT_HIDDEN int mt_emit_wait(struct mt_thread *t, uint64_t bytes);
MT_HIDDEN void mt_emit_locked_module_records(void);
MT_HIDDEN void mt_process_init(int flags, uint64_t fork_token);
MT_HIDDEN void mt_record_exit(int status);

/* mt_tsc is the time of an event: the recorder's coarse clock if it keeps
 * one (see mt_header.coarse), else the time-stamp counter. mt_tsc_of is
 * mt_tsc given mt_proc.hdr, for the hooks, which hold it in a register
 * rather than load it again past mt_seq_of's fence. */
MT_HOT uint64_t mt_tsc_of(struct mt_header *h)
{
	if (MT_LIKELY(h->coarse))
		return __atomic_load_n(&h->clock, __ATOMIC_RELAXED);
	return __builtin_ia32_rdtsc();
}
MT_HOT uint64_t mt_tsc(void) { return mt_tsc_of(mt_proc.hdr); }

/* modules.c: loaded objects and their unwind tables. */
struct mt_module {
	uint32_t id;
	uint32_t alive;   /* 0 unloaded, 1 live, 2 live and seen by the current refresh */
	int is_main;
	uintptr_t base;
	uintptr_t lo, hi;        /* the executable address range */
	const uint8_t *eh_frame_hdr;
	const char *path;
	uint32_t path_len;
	uint32_t build_id_len;
	uint8_t build_id[32];
	uint32_t nsegs;
	struct { uint64_t vaddr, memsz, offset, flags; } segs[8];
};
MT_HIDDEN void mt_modules_refresh(struct mt_thread *t);
extern struct mt_module *mt_modules MT_HIDDEN;
static inline struct mt_module *mt_module_at(uint32_t slot) { return &mt_modules[slot]; }
MT_HIDDEN uint32_t mt_modules_count(void);
MT_HIDDEN int mt_module_find(uintptr_t pc);
MT_HIDDEN void mt_modules_lock(void);
MT_HIDDEN void mt_modules_unlock(void);
MT_HIDDEN void mt_modules_after_fork(void);
extern uint32_t mt_modgen MT_HIDDEN;

/* unwind.c */
MT_HIDDEN void mt_unwind_flush(void);

/* stackuse.c: the stack in use, and each thread's high-water mark. */
MT_HIDDEN void mt_stack_setup(struct mt_thread *t, int main_thread);
MT_HIDDEN uint64_t mt_stack_high_water(struct mt_thread *t);
MT_HIDDEN void mt_stack_record(struct mt_thread *t);
MT_HIDDEN void mt_stack_after_fork(void);

/* calls.c: function entries and returns, with -stack-calls. */
extern uint64_t mt_calls_window MT_HIDDEN;
MT_HIDDEN void mt_calls_reset(struct mt_thread *t);
MT_HIDDEN void mt_calls_end(struct mt_thread *t);
MT_HIDDEN void mt_calls_due(struct mt_thread *t);

/* stacks.c: the call-stack tree in shared memory. */
MT_HIDDEN uint32_t mt_intern(struct mt_thread *t, uint32_t parent, uint32_t module, uint64_t offset);
MT_HIDDEN void mt_stacks_reset(void);

/* mt_frame_unchanged checks one frame f for mt_outer_unchanged, from
 * the frame itself. */
MT_HOT int mt_frame_unchanged(const struct mt_frame *f)
{
	if (*(const uintptr_t *)(f->sp - 8) != f->ra)
		return 0;
	if (f->bp_used && f->bp_slot && *(const uintptr_t *)(f->sp - 8 * f->bp_slot) != f->bp)
		return 0;
	if (f->cfa_at && *(const uintptr_t *)f->cfa_at != f->sp)
		return 0;
	return 1;
}

/* mt_outer_unchanged reports whether the frames of the previous stack
 * outside frame m are still on the stack as they were. The stack is kept
 * outermost first, so those are the frames from t->frame up to m. Their
 * unwind read memory, and that memory must still hold what it read: each
 * frame's return address (at its sp minus 8), its rbp where it was loaded
 * from a slot and mattered, and its CFA where it was loaded (a realigned
 * stack). Then, from the same pc, sp and rbp at frame m, the unwind would
 * find them again. (A return address alone is not enough: a frame with a
 * different rbp, as alloca gives, has its return address elsewhere, and
 * the old slot may still hold the old value.) The words of the frames
 * before t->listed are in t->check, one loop over them; the others are
 * checked frame by frame. */
MT_HOT int mt_outer_unchanged(const struct mt_thread *t, const struct mt_frame *m)
{
	const struct mt_frame *f = t->listed;
	const struct mt_check *c = t->check, *end = m < f ? c + m->check : t->check_end;
	for (; c < end; c++)
		if (*c->at != c->v)
			return 0;
	for (; f < m; f++)
		if (!mt_frame_unchanged(f))
			return 0;
	return 1;
}

/* mt_listed_unchanged is mt_outer_unchanged(t, t->listed): the frames
 * it checks are all listed. */
MT_HOT int mt_listed_unchanged(const struct mt_thread *t)
{
	for (const struct mt_check *c = t->check, *end = t->check_end; c < end; c++)
		if (*c->at != c->v)
			return 0;
	return 1;
}

/* mt_list lists the words of t's frames from t->listed up to f in
 * t->check, as many as fit. */
MT_HIDDEN void mt_list(struct mt_thread *t, const struct mt_frame *f);

/* mt_stack_use returns the bytes of t's stack in use at stack pointer
 * sp: from the base to sp, if that is in (stack_lo, stack_hi], else 0
 * (not known). One unsigned compare asks both. */
static inline uint64_t mt_stack_use(const struct mt_thread *t, uintptr_t sp)
{
	uintptr_t use = t->stack_hi - sp;
	return use < t->stack_hi - t->stack_lo ? use : 0;
}

/* mt_capture_slow is mt_capture_stack past its fast path. */
MT_HIDDEN void mt_capture_slow(struct mt_thread *t, const uintptr_t *frame);

/* mt_capture_stack sets t->stack_id, and t->stack_use, for the allocator
 * call whose hook has frame pointer frame (frame[0]: the caller's rbp,
 * frame[1]: the return address into the caller). Most events come from
 * where the thread's previous one came from: the caller's frame is the
 * previous stack's innermost (the frame the walk left in t->top), it and
 * the frames outside it unchanged, and the walk would stop there at once
 * and reuse the whole stack. That case, with the outer frames' words
 * already listed and no calls to publish, is checked inline in the hooks;
 * every other goes out of line (mt_capture_slow) in one call, so that
 * nothing of the check is live across a call and the hooks keep few
 * registers to save. */
MT_HOT void mt_capture_stack(struct mt_thread *t, const uintptr_t *frame)
{
	const struct mt_frame *f = t->top;
	/* listed is never NULL once the thread is attached: f == t->listed
	 * says that f is not either. */
	if (MT_LIKELY(f == t->listed && t->calls_n == 0 && t->modgen == mt_modgen) &&
	    f->sp == (uintptr_t)(frame + 2) && f->ra == frame[1] && (!f->bp_used || f->bp == frame[0]) &&
	    MT_LIKELY(mt_listed_unchanged(t))) {
		t->stack_id = f->node;
		t->stack_use = t->top_use;
		return;
	}
	mt_capture_slow(t, frame);
}

/* Small lock for rare paths (module refresh, node inserts). */
typedef struct { int v; } mt_lock_t;
static inline void mt_lock(mt_lock_t *l)
{
	unsigned spins = 0;
	while (__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE)) {
		while (__atomic_load_n(&l->v, __ATOMIC_RELAXED)) {
			/* The holder may be descheduled: stop burning its core. */
			if (++spins > 100)
				sched_yield();
			else
				__builtin_ia32_pause();
		}
	}
}
static inline void mt_unlock(mt_lock_t *l) { __atomic_store_n(&l->v, 0, __ATOMIC_RELEASE); }

/* mt_warn writes "memtrail: process <pid> (<program>): " what, then
 * detail (if not NULL) and a newline to stderr, in one write. */
MT_HIDDEN void mt_warn(const char *what, const char *detail);
MT_HIDDEN const char *mt_own_path(void);
MT_HIDDEN size_t mt_decimal(unsigned v, char *out);
MT_HIDDEN void mt_spawn_flush(struct mt_thread *t);
MT_HIDDEN const char *mt_own_allocator(size_t *len);
MT_HIDDEN int mt_is_definition(void *f);
MT_HIDDEN const char *const *mt_hooked_names(size_t *n);

/* entrypatch.c: recording through the executable's own allocator. */
MT_HIDDEN void mt_entry_patch(struct mt_real *r);
MT_HIDDEN int mt_entry_patched(void);
/* Set once the program's own allocator is patched in: the function that
 * sizes its blocks, which the hooks call as they call the program's other
 * functions (mt_own_call), for it may allocate (tcmalloc's does, once).
 * The program's malloc_usable_size, or, if it has none, one that says 0:
 * libc's would read a header that the program's blocks do not have. */
extern void *mt_own_usable MT_HIDDEN;
MT_HIDDEN uintptr_t mt_own_call(void *f, uintptr_t a0, uintptr_t a1, uintptr_t a2);
MT_HIDDEN int mt_own_abandoned(struct mt_thread *t, const void *hook_frame);
/* The hooks of the program's own operators, each calling the function of
 * its slot, recorded as the slot's API: as many as there are operator
 * deletes (12; 8 news), for an allocator such as jemalloc defines each at
 * its own address. */
#define MT_OWN_HOOKS 12
struct mt_own_hook {
	void *real;
	uint32_t api;
};
extern struct mt_own_hook mt_own_new[MT_OWN_HOOKS] MT_HIDDEN, mt_own_delete[MT_OWN_HOOKS] MT_HIDDEN;
extern void *const mt_own_new_hooks[MT_OWN_HOOKS] MT_HIDDEN;
extern void *const mt_own_delete_hooks[MT_OWN_HOOKS] MT_HIDDEN;


/*
 * The calling thread's state is found under a pthread key. A call of
 * pthread_getspecific on every event costs as much as the rest of
 * entering the agent, so the states are also cached, direct-mapped by the
 * thread pointer (%fs:0 holds its own address on x86-64: one load), and
 * each state says which thread it belongs to (tp): an entry is checked
 * against it, and a state given up when its thread exits says no thread
 * (see thread_exit). A fork child empties the cache: its new threads may
 * get the thread pointers of the parent's other threads.
 */
#define MT_SELF_CACHE 256
extern struct mt_thread *mt_self_cache[MT_SELF_CACHE] MT_HIDDEN;

MT_HOT uintptr_t mt_thread_pointer(void)
{
	uintptr_t tp;
	__asm__("mov %%fs:0, %0" : "=r"(tp));
	return tp;
}

/* mt_self_slot hashes a thread pointer: the product's top byte depends on
 * all of its bits, those of the page and above, where threads' differ. */
MT_HOT uint32_t mt_self_slot(uintptr_t tp)
{
	return (uint32_t)((tp * 0x9e3779b97f4a7c15ULL) >> 56) % MT_SELF_CACHE;
}

/* mt_self returns the calling thread's state, NULL if it has none. It
 * may only be called once the process is active: before, the key may not
 * be created yet, and key 0 could be someone else's. */
MT_HOT struct mt_thread *mt_self(void)
{
	uintptr_t tp = mt_thread_pointer();
	struct mt_thread **slot = &mt_self_cache[mt_self_slot(tp)];
	struct mt_thread *t = __atomic_load_n(slot, __ATOMIC_RELAXED);
	if (MT_LIKELY(t != NULL && __atomic_load_n(&t->tp, __ATOMIC_RELAXED) == tp))
		return t;
	t = pthread_getspecific(mt_thread_key);
	if (t != NULL && __atomic_load_n(&t->tp, __ATOMIC_RELAXED) == tp)
		__atomic_store_n(slot, t, __ATOMIC_RELAXED);
	return t;
}

/* mt_enter returns the calling thread's state, marked busy, or NULL when
 * this call must not be recorded (nested in the agent, or not recording).
 * The fast path looks in the cache of mt_self without asking the state
 * first: the cache is empty until the process is active (and again in a
 * fork child), and a state found there was attached by this very thread,
 * after it had seen the process active. Whether it still is, whether the
 * thread is in this generation and not busy are then one compare. */
MT_HOT struct mt_thread *mt_enter(void)
{
	uintptr_t tp = mt_thread_pointer();
	struct mt_thread *t = __atomic_load_n(&mt_self_cache[mt_self_slot(tp)], __ATOMIC_RELAXED);
	if (MT_LIKELY(t != NULL && __atomic_load_n(&t->tp, __ATOMIC_RELAXED) == tp &&
		      t->gen_busy == __atomic_load_n(&mt_proc.enter_key, __ATOMIC_RELAXED) &&
		      !__atomic_load_n(&mt_proc.hdr->disabled, __ATOMIC_RELAXED))) {
		t->busy = 1;
		return t;
	}
	/* Inlined in a hook, the frame address is the hook's own: a thread
	 * found busy needs it (see mt_own_abandoned). */
	return mt_enter_miss(__builtin_frame_address(0));
}

MT_HOT void mt_leave(struct mt_thread *t) { t->busy = 0; }

/* mt_seq takes the next sequence number of the process. */
static inline uint64_t mt_seq(void) { return __atomic_fetch_add(&mt_proc.hdr->seq, 1, __ATOMIC_SEQ_CST); }

/* mt_seq_of is mt_seq for the allocator hooks of thread t, h being
 * mt_proc.hdr. A locked instruction waits for every store before it to
 * reach the cache, the ring's lines among them, which the recorder's
 * core has just read: it is most of what publishing an event costs the
 * program. While t is the only thread of the process with a ring, no
 * other can take a number, and a plain increment does. The thread that attaches second ends that (see
 * seq_shared in process.c): it marks the counter shared, makes every
 * thread pass a memory barrier (membarrier), and waits until t is out of
 * the window below. t then either saw the mark, or had set in_seq before
 * the barrier, so the second thread sees in_seq and waits for t's store
 * to the counter, which comes before in_seq is cleared. */
MT_HOT uint64_t mt_seq_of(struct mt_thread *t, struct mt_header *h)
{
	__atomic_store_n(&t->in_seq, 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (MT_LIKELY(__atomic_load_n(&mt_proc.seq_owner, __ATOMIC_RELAXED) == (uintptr_t)t)) {
		uint64_t *seq = &h->seq, s = __atomic_load_n(seq, __ATOMIC_RELAXED);
		__atomic_store_n(seq, s + 1, __ATOMIC_RELAXED);
		__atomic_store_n(&t->in_seq, 0, __ATOMIC_RELEASE);
		return s;
	}
	__atomic_store_n(&t->in_seq, 0, __ATOMIC_RELAXED);
	return mt_seq();
}

/* mt_reserve makes sure n words fit in the thread's ring, waiting for
 * the recorder if need be, and sets *w to the write position they go at;
 * 0 if they never will (recording stopped: the event is counted as
 * dropped). The recorder's read position is only
 * looked at when the space known to be free runs out: its cache line
 * stays put otherwise. The allocator hooks reserve before they take a
 * sequence number, so that a thread waiting for space holds no number
 * back from the recorder, and so that nothing but the record's words is
 * live across the call. */
MT_HOT int mt_reserve(struct mt_thread *t, unsigned n, uint64_t *w)
{
	uint64_t bytes = (uint64_t)n * 8;
	/* Only this thread writes it. */
	*w = t->ctl->write;
	if (MT_LIKELY(*w + bytes <= t->ring_limit))
		return 1;
	if (!mt_emit_wait(t, bytes))
		return 0;
	*w = t->ctl->write; /* not kept across the call */
	return 1;
}

/* mt_ring_at returns the byte offset in t's ring of write position w. */
MT_HOT uint64_t mt_ring_at(const struct mt_thread *t, uint64_t w) { return w & t->ring_mask; }

/* mt_ring_word returns the word at byte offset at of t's ring. */
MT_HOT uint64_t *mt_ring_word(const struct mt_thread *t, uint64_t at) { return (uint64_t *)((uint8_t *)t->ring + at); }

/* mt_ring_fits reports whether a record of n words at byte offset at
 * ends before the ring's end. The allocator hooks then write their
 * records straight into the ring, word by word as each is computed: built
 * in an array first, the words are all live at once, and the hooks save
 * more registers to hold them. */
MT_HOT int mt_ring_fits(const struct mt_thread *t, uint64_t at, unsigned n) { return at + (uint64_t)n * 8 <= t->ring_mask + 1; }

/* mt_publish hands the recorder the record of n words written at byte
 * offset at of t's ring, reserved at write position w. The line a few
 * records ahead is then asked for with the intent to write it: the
 * recorder's core read it last, a ring ago, and the store would otherwise
 * wait for it to be taken from there. */
MT_HOT void mt_publish(struct mt_thread *t, uint64_t w, uint64_t at, unsigned n)
{
	__atomic_store_n(&t->ctl->write, w + (uint64_t)n * 8, __ATOMIC_RELEASE);
	if (MT_LIKELY(mt_proc.prefetchw))
		__asm__ volatile("prefetchw %0" : : "m"(*mt_ring_word(t, (at + (n + MT_PREFETCH_WORDS) * 8) & t->ring_mask)));
}

/* mt_put publishes a record of n words, reserved at write position w
 * (mt_reserve), in the thread's ring. The ring is written a word at a
 * time: the words were just computed one by one, and a copy that loads
 * them back 16 bytes at a time, as the compiler vectorizes it, waits for
 * their stores to reach the cache first; unrolled, the words go from
 * registers straight to the ring. A record that wraps around the ring's
 * end is written out of line (mt_put_wrapped): it is rare, and inline it
 * would take registers that the hooks would then save on every call. */
MT_HIDDEN void mt_put_wrapped(struct mt_thread *t, uint64_t w, const uint64_t *words, unsigned n);
MT_HOT void mt_put(struct mt_thread *t, uint64_t w, const uint64_t *words, unsigned n)
{
	uint64_t at = mt_ring_at(t, w);
	if (MT_LIKELY(mt_ring_fits(t, at, n))) {
		uint64_t *to = mt_ring_word(t, at);
#pragma GCC unroll 16
		for (unsigned i = 0; i < n; i++)
			to[i] = words[i];
		mt_publish(t, w, at, n);
		return;
	}
	mt_put_wrapped(t, w, words, n);
}

/* mt_emit publishes a record of n words in the thread's ring. */
MT_HOT void mt_emit(struct mt_thread *t, const uint64_t *words, unsigned n)
{
	uint64_t w;
	if (mt_reserve(t, n, &w))
		mt_put(t, w, words, n);
}

#endif
