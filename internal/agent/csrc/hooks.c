/*
 * hooks.c: the allocator entry points the agent interposes.
 *
 * Each hook captures the call stack from its own frame, calls the real
 * function and publishes one record. Sequence numbers order records across
 * threads: an allocation takes its number after the block exists, a release
 * takes its number (and publishes its record) before the block is given
 * back, so no other thread can be handed the same address with a smaller
 * number, and a release that makes libc abort is still recorded.
 *
 * The C++ operators are implemented here on top of the real malloc rather
 * than forwarded to the C++ runtime, so one operator new is one event and
 * the agent needs no C++ runtime; a failed allocation still calls the new
 * handler and throws std::bad_alloc, found at run time in the program's own
 * C++ runtime.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

#define EXPORT __attribute__((visibility("default")))
#define FRAME ((uintptr_t *)__builtin_frame_address(0))
#define PAGE 4096u

static inline void resolved(void)
{
	if (MT_UNLIKELY(mt_real.free == NULL))
		mt_resolve();
}

static inline int resolving(void) { return mt_real.free == NULL; }

/* With -leak-origins, the lowest address and the highest end of any block
 * handed out: a word of a freed block outside them points to no block. */
static uintptr_t heap_lo = UINTPTR_MAX, heap_hi;

static inline void note_block(const struct mt_header *h, const void *p, size_t n)
{
	if (MT_LIKELY(!h->free_pointers))
		return;
	uintptr_t a = (uintptr_t)p, end = a + (n > 0 ? n : 1);
	uintptr_t lo = __atomic_load_n(&heap_lo, __ATOMIC_RELAXED), hi = __atomic_load_n(&heap_hi, __ATOMIC_RELAXED);
	while (a < lo && !__atomic_compare_exchange_n(&heap_lo, &lo, a, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	while (end > hi && !__atomic_compare_exchange_n(&heap_hi, &hi, end, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* glibc_chunks says that the blocks are glibc's, whose malloc_usable_size
 * usable_size may read from their headers (see mt_usable_setup). */
static int glibc_chunks;

/* usable_size is malloc_usable_size(p), of a block in use: the program's
 * own once the agent records through the executable's own allocator
 * (entrypatch.c), or 0 if it has none. New blocks are then left as they
 * are, and freed ones send no pointers. Of a glibc block not mmapped, it
 * is read from the chunk's header without the call, which costs more
 * than the rest of clearing a small block: the word before the block is
 * the chunk's size with flags in its low three bits, bit 1 saying mmapped;
 * the block runs to the next chunk's size word, which is its own while it
 * is in use. */
static inline size_t usable_size(void *p)
{
	if (MT_LIKELY(glibc_chunks)) {
		size_t h = ((const size_t *)p)[-1];
		if (MT_LIKELY((h & 2) == 0))
			return (h & ~(size_t)7) - sizeof h;
	}
	if (MT_UNLIKELY(mt_own_usable != NULL))
		return mt_own_call(mt_own_usable, (uintptr_t)p, 0, 0);
	return malloc_usable_size(p);
}

/* mt_usable_setup sets glibc_chunks, as a process starts recording: if
 * malloc and malloc_usable_size are glibc's (not the program's own, nor
 * another allocator's or glibc's malloc debugging library's, which puts
 * its own words around blocks), and usable_size agrees with
 * malloc_usable_size on blocks of every size up to a few pages: a check
 * rather than a glibc version, so that a glibc laid out otherwise keeps
 * the call. It runs with the thread busy (mt_process_init). */
void mt_usable_setup(void)
{
	Dl_info libc, m, u;
	glibc_chunks = 0;
	if (mt_own_usable != NULL || !dladdr((void *)gnu_get_libc_version, &libc) || !dladdr((void *)mt_real.malloc, &m) ||
	    !dladdr((void *)malloc_usable_size, &u) || m.dli_fbase != libc.dli_fbase || u.dli_fbase != libc.dli_fbase)
		return;
	for (size_t n = 0; n <= 3 * PAGE; n += n < 256 ? 1 : 61) {
		void *p = mt_real.malloc(n);
		if (p == NULL)
			return;
		size_t h = ((const size_t *)p)[-1], want = malloc_usable_size(p);
		mt_real.free(p);
		if ((h & 2) == 0 && (h & ~(size_t)7) - sizeof h != want)
			return;
	}
	glibc_chunks = 1;
}

/* emit_free_pointers writes the FREE record of block p, about to be
 * released, with what p holds that may point to a block after its five
 * words: the recorder keeps, for each live block, the last free of a block
 * that pointed to it, and a block lost at exit is traced to it. The whole
 * usable size is read, as malloc may give more than was asked; the
 * recorder drops the words past the size asked for. Only words that may be
 * a block's start are sent: in the heap's bounds and 16-byte aligned, as
 * glibc's blocks are (the recorder follows only pointers to a block's
 * start). Words that do not fit in the FREE record go before it, in
 * POINTERS records. */
static void emit_free_pointers(struct mt_thread *t, enum mt_api api, const void *p)
{
	uintptr_t lo = __atomic_load_n(&heap_lo, __ATOMIC_RELAXED), hi = __atomic_load_n(&heap_hi, __ATOMIC_RELAXED);
	const uintptr_t *w = p;
	size_t n = usable_size((void *)p) / sizeof *w;
	uint64_t rec[255];
	unsigned k = 5;
	for (size_t i = 0; i < n; i++) {
		uintptr_t v = w[i];
		if (v < lo || v >= hi || (v & 15) != 0 || v >> 48 != 0)
			continue;
		if (k == 255) {
			rec[0] = MT_REC_POINTERS | (uint64_t)k << 8;
			rec[1] = mt_seq();
			rec[2] = (uintptr_t)p;
			mt_emit(t, rec, k);
			k = 5;
		}
		rec[k++] = (uint64_t)(i < 0xffff ? i : 0xffff) << 48 | v;
	}
	rec[0] = MT_REC_FREE | (uint64_t)k << 8 | (uint64_t)api << MT_API_SHIFT | (uint64_t)t->stack_id << MT_STACK_SHIFT;
	rec[1] = mt_seq();
	rec[2] = mt_tsc();
	rec[3] = (uintptr_t)p;
	rec[4] = t->stack_use;
	uint64_t at;
	if (mt_reserve(t, k, &at)) {
		t->same_tsc = rec[2], t->same_use = rec[4];
		mt_put(t, at, rec, k);
	}
}

/* emit_wrapped is the end of emit_alloc and emit_free (k words: an
 * allocation's record of 6 or 4 (ALLOC_SAME), with size n, or a free's of
 * 5 or 3 (FREE_SAME)) for a record that wraps around the ring's end: rare,
 * and out of line, so that the hooks keep no room on the stack for the
 * record. */
static __attribute__((noinline)) void emit_wrapped(struct mt_thread *t, uint64_t w, uint64_t head, uint64_t tsc, const void *p,
						   size_t n, unsigned k)
{
	uint64_t rec[6] = {head, mt_seq_of(t, mt_proc.hdr), tsc, (uintptr_t)p, n, t->stack_use};
	switch (k) {
	case 5:
		rec[4] = t->stack_use;
		break;
	case 4:
		rec[2] = (uintptr_t)p, rec[3] = n;
		break;
	case 3:
		rec[2] = (uintptr_t)p;
		break;
	}
	mt_put_wrapped(t, w, rec, k);
}

/* emit_alloc records an allocation of n bytes at p; emit_free a free of
 * p. Each reserves room for a whole record, and writes a short one
 * (ALLOC_SAME, FREE_SAME) when the event's time and stack in use are
 * those of the thread's latest whole record: in a loop, as most are. */
static inline __attribute__((always_inline)) void emit_alloc(struct mt_thread *t, enum mt_api api, const void *p, size_t n)
{
	note_block(mt_proc.hdr, p, n);
	uint64_t w;
	if (!mt_reserve(t, 6, &w))
		return;
	struct mt_header *h = mt_proc.hdr; /* here: not kept across mt_reserve's call */
	uint64_t tsc = mt_tsc_of(h), use = t->stack_use;
	int same = tsc == t->same_tsc && use == t->same_use;
	unsigned k = same ? 4 : 6;
	uint64_t head = (same ? MT_REC_ALLOC_SAME : MT_REC_ALLOC) | (uint64_t)k << 8 | (uint64_t)api << MT_API_SHIFT |
			(uint64_t)t->stack_id << MT_STACK_SHIFT;
	t->same_tsc = tsc, t->same_use = use;
	uint64_t at = mt_ring_at(t, w);
	if (MT_LIKELY(mt_ring_fits(t, at, k))) {
		uint64_t *to = mt_ring_word(t, at);
		to[0] = head, to[1] = mt_seq_of(t, h);
		if (same)
			to[2] = (uintptr_t)p, to[3] = n;
		else
			to[2] = tsc, to[3] = (uintptr_t)p, to[4] = n, to[5] = use;
		mt_publish(t, w, at, k);
		return;
	}
	emit_wrapped(t, w, head, tsc, p, n, k);
}

static inline __attribute__((always_inline)) void emit_free(struct mt_thread *t, enum mt_api api, const void *p)
{
	if (MT_UNLIKELY(mt_proc.hdr->free_pointers)) {
		emit_free_pointers(t, api, p);
		return;
	}
	uint64_t w;
	if (!mt_reserve(t, 5, &w))
		return;
	struct mt_header *h = mt_proc.hdr;
	uint64_t tsc = mt_tsc_of(h), use = t->stack_use;
	int same = tsc == t->same_tsc && use == t->same_use;
	unsigned k = same ? 3 : 5;
	uint64_t head = (same ? MT_REC_FREE_SAME : MT_REC_FREE) | (uint64_t)k << 8 | (uint64_t)api << MT_API_SHIFT |
			(uint64_t)t->stack_id << MT_STACK_SHIFT;
	t->same_tsc = tsc, t->same_use = use;
	uint64_t at = mt_ring_at(t, w);
	if (MT_LIKELY(mt_ring_fits(t, at, k))) {
		uint64_t *to = mt_ring_word(t, at);
		to[0] = head, to[1] = mt_seq_of(t, h);
		if (same)
			to[2] = (uintptr_t)p;
		else
			to[2] = tsc, to[3] = (uintptr_t)p, to[4] = use;
		mt_publish(t, w, at, k);
		return;
	}
	emit_wrapped(t, w, head, tsc, p, 0, k);
}

/* ---- never-written memory ----
 *
 * The leak scan takes any word of a live block that holds a block's
 * address for a pointer. A block carved from freed memory holds what the
 * freed block held until the program writes it: its stale pointers would
 * keep lost blocks reachable, and a block's class would depend on where
 * the allocator happened to put the blocks, which address randomization
 * changes from run to run. memcheck takes never-written words for
 * undefined, and undefined words for no pointers. The agent cannot see
 * which words the program writes, so it makes the ones not written yet
 * read as zero: a new block is cleared, all of its usable size (realloc
 * carries the slack past the size asked for into a grown block), and so
 * is what realloc adds to a block. calloc's blocks are zero already. The
 * blocks of a realloc keep the old block's words, written or not, as
 * memcheck's do.
 *
 * Clearing must not bring in memory the program has not touched: a big
 * block is often fresh from mmap or brk, zero and not yet in memory, and
 * writing it would raise the program's RSS. So the whole pages of a block
 * are cleared only where mincore says they are in memory; a page that is
 * not is fresh, hence zero, or swapped out, and then its stale words stay.
 * The partial pages at a block's ends are cleared: an allocator writes its
 * headers beside its blocks, so they are in memory anyway. */

/* clear_resident clears the pages of [lo, hi), page-aligned, that are in
 * memory. */
static void clear_resident(uintptr_t lo, uintptr_t hi)
{
	unsigned char vec[256]; /* on the program's stack: keep it small */
	while (lo < hi) {
		size_t len = hi - lo;
		if (len > sizeof vec * PAGE)
			len = sizeof vec * PAGE;
		if (mincore((void *)lo, len, vec) != 0)
			return; /* leave what mincore cannot tell about as it is */
		for (size_t i = 0, n = len / PAGE; i < n;) {
			size_t j = i;
			while (j < n && (vec[j] & 1))
				j++;
			if (j > i)
				memset((void *)(lo + i * PAGE), 0, (j - i) * PAGE);
			i = j + 1;
		}
		lo += len;
	}
}

/* SMALL_CLEAR is the most bytes clear_small clears. Most blocks are
 * smaller: clearing them with a few stores in the hook, rather than in a
 * call of memset, which finds its way by the size first, took about a
 * tenth of the agent's instructions per allocation off a loop of small
 * mallocs. */
#define SMALL_CLEAR 128u

/* clear_small clears the n bytes at a, 0 < n <= SMALL_CLEAR, with 16- and
 * 8-byte stores that may overlap; a need not be aligned. */
static inline __attribute__((always_inline)) void clear_small(uintptr_t a, size_t n)
{
	char *c = (char *)a;
	if (MT_LIKELY(n >= 16)) {
		__builtin_memset(c, 0, 16);
		__builtin_memset(c + n - 16, 0, 16);
		if (n > 32) {
			__builtin_memset(c + 16, 0, 16);
			__builtin_memset(c + n - 32, 0, 16);
			if (n > 64) {
				__builtin_memset(c + 32, 0, 32);
				__builtin_memset(c + n - 64, 0, 32);
			}
		}
	} else if (n >= 8) {
		__builtin_memset(c, 0, 8);
		__builtin_memset(c + n - 8, 0, 8);
	} else {
		/* volatile: the compiler would make the loop a memset call */
		for (size_t i = 0; i < n; i++)
			((volatile char *)c)[i] = 0;
	}
}

/* clear_pages clears [a, end), which has whole pages inside, but only
 * those of them that are in memory. Out of line: big blocks are rare. */
static __attribute__((noinline)) void clear_pages(uintptr_t a, uintptr_t end)
{
	uintptr_t lo = (a + PAGE - 1) & ~(uintptr_t)(PAGE - 1), hi = end & ~(uintptr_t)(PAGE - 1);
	memset((void *)a, 0, lo - a);
	memset((void *)hi, 0, end - hi);
	clear_resident(lo, hi);
}

/* clear_unwritten clears bytes [from, to) of the block at p, which the
 * program has not written yet. */
static inline __attribute__((always_inline)) void clear_unwritten(void *p, size_t from, size_t to)
{
	uintptr_t a = (uintptr_t)p + from, end = (uintptr_t)p + to;
	if (a >= end)
		return;
	if (MT_LIKELY(end - a <= SMALL_CLEAR)) {
		clear_small(a, end - a); /* less than a page: no whole page inside */
		return;
	}
	uintptr_t lo = (a + PAGE - 1) & ~(uintptr_t)(PAGE - 1), hi = end & ~(uintptr_t)(PAGE - 1);
	if (MT_LIKELY(hi <= lo))
		memset((void *)a, 0, end - a);
	else
		clear_pages(a, end);
}

/* clear_new clears a new block that may hold stale data: a small one
 * (0 < u <= SMALL_CLEAR) asked with one compare. */
static inline __attribute__((always_inline)) void clear_new(void *p)
{
	size_t u = usable_size(p);
	if (MT_LIKELY(u - 1 < SMALL_CLEAR))
		clear_small((uintptr_t)p, u);
	else
		clear_unwritten(p, 0, u);
}

/* An allocation hook: real is the call that allocates, early what
 * stands for it while the real functions are being looked up; stale says
 * the block may hold stale data (see clear_unwritten). A block the agent
 * does not record is not scanned, and is left as it is. Whether the real
 * functions are looked up is asked only of a call not recorded: setting
 * the process up looks them up first, so a recording thread has them. */
#define ALLOC_HOOK(api, size, real, stale, early)                 \
	do {                                                      \
		struct mt_thread *t = mt_enter();                 \
		if (t == NULL) {                                  \
			resolved();                               \
			if (MT_UNLIKELY(resolving()))             \
				return early;                     \
			return real;                              \
		}                                                 \
		mt_capture_stack(t, FRAME);                       \
		void *p = real;                                   \
		if (p != NULL) {                                  \
			if (stale)                                \
				clear_new(p);                     \
			emit_alloc(t, api, p, size);              \
		}                                                 \
		mt_leave(t);                                       \
		return p;                                         \
	} while (0)

/* A release hook. A block of the bootstrap buffer is never the real
 * allocator's; see ALLOC_HOOK for the lookup of the real functions. */
#define FREE_HOOK(api, ptr)                                       \
	do {                                                      \
		if ((ptr) == NULL || mt_in_bootstrap(ptr))        \
			return;                                   \
		struct mt_thread *t = mt_enter();                 \
		if (t == NULL) {                                  \
			resolved();                               \
			mt_real.free(ptr);                        \
			return;                                   \
		}                                                 \
		mt_capture_stack(t, FRAME);                       \
		emit_free(t, api, ptr);                           \
		mt_real.free(ptr);                                \
		mt_leave(t);                                       \
	} while (0)

EXPORT void *malloc(size_t n) { ALLOC_HOOK(MT_API_MALLOC, n, mt_real.malloc(n), 1, mt_bootstrap_alloc(n, 16)); }

EXPORT void free(void *p) { FREE_HOOK(MT_API_FREE, p); }

/* calloc_early is calloc while the real functions are being looked up. */
static void *calloc_early(size_t count, size_t size)
{
	size_t n;
	if (__builtin_mul_overflow(count, size, &n))
		return NULL;
	return mt_bootstrap_alloc(n, 16); /* static memory: already zero */
}

EXPORT void *calloc(size_t count, size_t size)
{
	ALLOC_HOOK(MT_API_CALLOC, count * size, mt_real.calloc(count, size), 0, calloc_early(count, size));
}

/* realloc_common is realloc and reallocarray, the size already checked
 * for overflow by reallocarray. Both call the real realloc: glibc's
 * reallocarray calls realloc through the PLT, into the agent's own hook,
 * which would find the thread busy and count an event lost. */
static void *realloc_common(struct mt_thread *t, enum mt_api api, void *old, size_t size)
{
	if (old == NULL) {
		void *p = mt_real.realloc(NULL, size);
		if (p != NULL) {
			clear_new(p);
			emit_alloc(t, api, p, size);
		}
		return p;
	}
	if (size == 0) {
		/* glibc releases the block and returns NULL. */
		emit_free(t, api, old);
		return mt_real.realloc(old, 0);
	}
	uint64_t released = mt_seq_of(t, mt_proc.hdr);
	/* The allocator reads old's header as much to move or grow it. */
	size_t kept = usable_size(old);
	void *p = mt_real.realloc(old, size);
	if (p == NULL) {
		uint64_t rec[2] = {MT_REC_SKIP | 2 << 8, released};
		mt_emit(t, rec, 2);
		return NULL;
	}
	clear_unwritten(p, kept, usable_size(p));
	note_block(mt_proc.hdr, p, size);
	uint64_t rec[8] = {MT_REC_REALLOC | 8 << 8 | (uint64_t)api << MT_API_SHIFT | (uint64_t)t->stack_id << MT_STACK_SHIFT,
			   released, mt_seq_of(t, mt_proc.hdr), mt_tsc(), (uintptr_t)old, (uintptr_t)p, size, t->stack_use};
	mt_emit(t, rec, 8);
	return p;
}

/* from_bootstrap moves a bootstrap block to the real heap. */
static void *from_bootstrap(void *old, size_t size)
{
	void *p = malloc(size);
	if (p != NULL) {
		size_t n = mt_bootstrap_size(old);
		memcpy(p, old, n < size ? n : size);
	}
	return p;
}

EXPORT void *realloc(void *old, size_t size)
{
	resolved();
	if (MT_UNLIKELY(resolving())) {
		void *p = mt_bootstrap_alloc(size, 16);
		if (p != NULL && old != NULL)
			memcpy(p, old, mt_bootstrap_size(old) < size ? mt_bootstrap_size(old) : size);
		return p;
	}
	if (MT_UNLIKELY(old != NULL && mt_in_bootstrap(old)))
		return from_bootstrap(old, size);
	struct mt_thread *t = mt_enter();
	if (t == NULL)
		return mt_real.realloc(old, size);
	mt_capture_stack(t, FRAME);
	void *p = realloc_common(t, MT_API_REALLOC, old, size);
	mt_leave(t);
	return p;
}

EXPORT void *reallocarray(void *old, size_t count, size_t elem)
{
	size_t size;
	resolved();
	if (__builtin_mul_overflow(count, elem, &size)) {
		errno = ENOMEM;
		return NULL;
	}
	if (MT_UNLIKELY(resolving() || (old != NULL && mt_in_bootstrap(old))))
		return realloc(old, size);
	struct mt_thread *t = mt_enter();
	if (t == NULL)
		return mt_real.realloc(old, size);
	mt_capture_stack(t, FRAME);
	void *p = realloc_common(t, MT_API_REALLOCARRAY, old, size);
	mt_leave(t);
	return p;
}

EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	resolved();
	if (MT_UNLIKELY(resolving())) {
		*out = mt_bootstrap_alloc(size, align);
		return *out != NULL ? 0 : ENOMEM;
	}
	struct mt_thread *t = mt_enter();
	if (t == NULL)
		return mt_real.posix_memalign(out, align, size);
	mt_capture_stack(t, FRAME);
	int r = mt_real.posix_memalign(out, align, size);
	if (r == 0 && *out != NULL) {
		clear_new(*out);
		emit_alloc(t, MT_API_POSIX_MEMALIGN, *out, size);
	}
	mt_leave(t);
	return r;
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
	ALLOC_HOOK(MT_API_ALIGNED_ALLOC, size, mt_real.aligned_alloc(align, size), 1, mt_bootstrap_alloc(size, align));
}

EXPORT void *memalign(size_t align, size_t size)
{
	ALLOC_HOOK(MT_API_MEMALIGN, size, mt_real.memalign(align, size), 1, mt_bootstrap_alloc(size, align));
}

EXPORT void *valloc(size_t size)
{
	ALLOC_HOOK(MT_API_VALLOC, size, mt_real.valloc(size), 1, mt_bootstrap_alloc(size, 4096));
}

EXPORT void *pvalloc(size_t size)
{
	ALLOC_HOOK(MT_API_PVALLOC, size, mt_real.pvalloc(size), 1, mt_bootstrap_alloc((size + 4095) & ~(size_t)4095, 4096));
}

/* The hooks by names the program cannot take: entrypatch.c sends the
 * program's own allocation functions to them. */
#if defined(__clang__)
#define HOOK_ALIAS(name) extern __typeof(name) mt_hook_##name MT_HIDDEN __attribute__((alias(#name)))
#else /* gcc wants an alias to carry libc's attributes of its target */
#define HOOK_ALIAS(name) extern __typeof(name) mt_hook_##name MT_HIDDEN __attribute__((alias(#name), copy(name)))
#endif
HOOK_ALIAS(malloc);
HOOK_ALIAS(free);
HOOK_ALIAS(calloc);
HOOK_ALIAS(realloc);
HOOK_ALIAS(posix_memalign);
HOOK_ALIAS(aligned_alloc);
HOOK_ALIAS(memalign);
HOOK_ALIAS(valloc);
HOOK_ALIAS(pvalloc);

/* The program's own operators (entrypatch.c), one hook for each slot.
 * A size or flag argument passes through in the registers it came in. */
struct mt_own_hook mt_own_new[MT_OWN_HOOKS], mt_own_delete[MT_OWN_HOOKS];

#define OWN_HOOKS(k)                                                                                 \
	static void *own_new_##k(size_t n, uintptr_t a1, uintptr_t a2)                             \
	{                                                                                            \
		void *real = mt_own_new[k].real;                                                     \
		struct mt_thread *t = mt_enter();                                                    \
		if (t == NULL)                                                                       \
			return (void *)mt_own_call(real, n, a1, a2);                                 \
		mt_capture_stack(t, FRAME);                                                          \
		void *p = (void *)mt_own_call(real, n, a1, a2);                                      \
		if (p != NULL) {                                                                     \
			clear_new(p);                                                                \
			emit_alloc(t, (enum mt_api)mt_own_new[k].api, p, n);                          \
		}                                                                                    \
		mt_leave(t);                                                                          \
		return p;                                                                            \
	}                                                                                            \
	static void own_delete_##k(void *p, uintptr_t a1, uintptr_t a2)                            \
	{                                                                                            \
		void *real = mt_own_delete[k].real;                                                  \
		struct mt_thread *t = p != NULL && !mt_in_bootstrap(p) ? mt_enter() : NULL;          \
		if (t == NULL) {                                                                     \
			if (!mt_in_bootstrap(p))                                                     \
				mt_own_call(real, (uintptr_t)p, a1, a2);                             \
			return;                                                                      \
		}                                                                                    \
		mt_capture_stack(t, FRAME);                                                          \
		emit_free(t, (enum mt_api)mt_own_delete[k].api, p);                                  \
		mt_own_call(real, (uintptr_t)p, a1, a2);                                             \
		mt_leave(t);                                                                          \
	}
OWN_HOOKS(0)
OWN_HOOKS(1)
OWN_HOOKS(2)
OWN_HOOKS(3)
OWN_HOOKS(4)
OWN_HOOKS(5)
OWN_HOOKS(6)
OWN_HOOKS(7)
OWN_HOOKS(8)
OWN_HOOKS(9)
OWN_HOOKS(10)
OWN_HOOKS(11)
void *const mt_own_new_hooks[MT_OWN_HOOKS] = {own_new_0, own_new_1, own_new_2, own_new_3, own_new_4,  own_new_5,
					     own_new_6, own_new_7, own_new_8, own_new_9, own_new_10, own_new_11};
void *const mt_own_delete_hooks[MT_OWN_HOOKS] = {own_delete_0, own_delete_1, own_delete_2,  own_delete_3,
						own_delete_4, own_delete_5, own_delete_6,  own_delete_7,
						own_delete_8, own_delete_9, own_delete_10, own_delete_11};

/* ---- C++ operators ---- */

typedef void (*new_handler_fn)(void);

static new_handler_fn current_new_handler(void)
{
	new_handler_fn (*get)(void) = (new_handler_fn(*)(void))dlsym(RTLD_DEFAULT, "_ZSt15get_new_handlerv");
	return get != NULL ? get() : NULL;
}

__attribute__((noreturn)) static void throw_bad_alloc(void)
{
	void (*thrower)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "_ZSt17__throw_bad_allocv");
	if (thrower != NULL)
		thrower();
	mt_warn("operator new failed and std::bad_alloc cannot be thrown; aborting", NULL);
	abort();
}

/* cxx_alloc allocates as operator new does: retry after the new handler,
 * throw std::bad_alloc (or return NULL for nothrow) without one. The
 * thread's busy flag is dropped around the handler and the throw, so the
 * handler's own allocations are recorded and an exception leaves the
 * agent's state clean. */
static void *cxx_alloc(struct mt_thread **t, size_t size, size_t align, int nothrow)
{
	resolved();
	uint32_t stack_id = *t != NULL ? (*t)->stack_id : 0;
	uint64_t stack_use = *t != NULL ? (*t)->stack_use : 0;
	for (;;) {
		void *p = align ? mt_real.memalign(align, size ? size : 1) : mt_real.malloc(size ? size : 1);
		if (p != NULL)
			return p;
		int had = *t != NULL;
		if (had)
			mt_leave(*t);
		new_handler_fn h = current_new_handler();
		if (h == NULL) {
			if (nothrow)
				return *t = NULL, NULL;
			throw_bad_alloc();
		}
		h();
		if (had) {
			/* The handler's own allocations reuse the thread's
			 * state: keep this event's stack. */
			*t = mt_enter();
			if (*t != NULL)
				(*t)->stack_id = stack_id, (*t)->stack_use = stack_use;
		}
	}
}

#define NEW_HOOK(api, size, align, nothrow)                           \
	do {                                                          \
		resolved();                                           \
		struct mt_thread *t = mt_enter();                     \
		if (t != NULL)                                        \
			mt_capture_stack(t, FRAME);                   \
		void *p = cxx_alloc(&t, size, align, nothrow);        \
		if (t != NULL) {                                      \
			if (p != NULL) {                              \
				clear_new(p);                         \
				emit_alloc(t, api, p, size);          \
			}                                             \
			mt_leave(t);                                   \
		}                                                     \
		return p;                                             \
	} while (0)

typedef struct nothrow_t nothrow_t;

EXPORT void *_Znwm(size_t n) { NEW_HOOK(MT_API_NEW, n, 0, 0); }
EXPORT void *_Znam(size_t n) { NEW_HOOK(MT_API_NEW_ARRAY, n, 0, 0); }
EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const nothrow_t *nt) { (void)nt; NEW_HOOK(MT_API_NEW_NOTHROW, n, 0, 1); }
EXPORT void *_ZnamRKSt9nothrow_t(size_t n, const nothrow_t *nt) { (void)nt; NEW_HOOK(MT_API_NEW_ARRAY_NOTHROW, n, 0, 1); }
EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t al) { NEW_HOOK(MT_API_NEW_ALIGNED, n, al, 0); }
EXPORT void *_ZnamSt11align_val_t(size_t n, size_t al) { NEW_HOOK(MT_API_NEW_ARRAY_ALIGNED, n, al, 0); }
EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const nothrow_t *nt)
{
	(void)nt;
	NEW_HOOK(MT_API_NEW_ALIGNED_NOTHROW, n, al, 1);
}
EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const nothrow_t *nt)
{
	(void)nt;
	NEW_HOOK(MT_API_NEW_ARRAY_ALIGNED_NOTHROW, n, al, 1);
}

EXPORT void _ZdlPv(void *p) { FREE_HOOK(MT_API_DELETE, p); }
EXPORT void _ZdaPv(void *p) { FREE_HOOK(MT_API_DELETE_ARRAY, p); }
EXPORT void _ZdlPvm(void *p, size_t n) { (void)n; FREE_HOOK(MT_API_DELETE_SIZED, p); }
EXPORT void _ZdaPvm(void *p, size_t n) { (void)n; FREE_HOOK(MT_API_DELETE_ARRAY_SIZED, p); }
EXPORT void _ZdlPvSt11align_val_t(void *p, size_t al) { (void)al; FREE_HOOK(MT_API_DELETE_ALIGNED, p); }
EXPORT void _ZdaPvSt11align_val_t(void *p, size_t al) { (void)al; FREE_HOOK(MT_API_DELETE_ARRAY_ALIGNED, p); }
EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t al)
{
	(void)n, (void)al;
	FREE_HOOK(MT_API_DELETE_SIZED_ALIGNED, p);
}
EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t al)
{
	(void)n, (void)al;
	FREE_HOOK(MT_API_DELETE_ARRAY_SIZED_ALIGNED, p);
}
EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const nothrow_t *nt) { (void)nt; FREE_HOOK(MT_API_DELETE_NOTHROW, p); }
EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const nothrow_t *nt) { (void)nt; FREE_HOOK(MT_API_DELETE_ARRAY_NOTHROW, p); }
EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const nothrow_t *nt)
{
	(void)al, (void)nt;
	FREE_HOOK(MT_API_DELETE_ALIGNED_NOTHROW, p);
}
EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const nothrow_t *nt)
{
	(void)al, (void)nt;
	FREE_HOOK(MT_API_DELETE_ARRAY_ALIGNED_NOTHROW, p);
}

/* ---- process life ---- */

EXPORT int dlclose(void *handle)
{
	resolved();
	int r = mt_real.dlclose(handle);
	struct mt_thread *t = mt_enter();
	if (t != NULL) {
		mt_modules_refresh(t);
		mt_leave(t);
	}
	return r;
}

EXPORT void _exit(int status)
{
	resolved();
	mt_record_exit(status);
	if (mt_real._exit != NULL)
		mt_real._exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

EXPORT void _Exit(int status)
{
	resolved();
	mt_record_exit(status);
	if (mt_real._Exit != NULL)
		mt_real._Exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}
