/*
 * stackuse.c: how much of each thread's stack is in use.
 *
 * Every hook notes the stack in use at its call: the thread's stack base
 * (the highest address of its stack) minus the caller's stack pointer.
 * Between heap events a thread may go deeper; that is caught the way
 * embedded developers catch it, by painting:
 *
 *  1. When a thread is first seen, its stack below the stack pointer is
 *     filled with a pattern from the lowest page that is resident already
 *     (the main thread's stack, which the dynamic loader used, or one
 *     glibc reuses for a new thread): that part was in use before, so
 *     painting it costs the program at most that much memory (its holes:
 *     a big frame may skip pages). The pages below it are left alone: the
 *     kernel hands them out zeroed on their first touch, so zero is their
 *     paint. Nothing outside the stack's mapping is touched, and no more
 *     than PAINT_MAX below the stack pointer.
 *  2. When the thread ends (its key's destructor) or the process exits
 *     (in the exiting thread), the lowest resident page of the stack is
 *     found with mincore, and the stack is read upwards from there to
 *     the first byte that is no longer paint: the deepest byte ever
 *     written. That is the thread's high-water mark, sent in a STACK
 *     record.
 *
 * A thread that is not running on the stack it was found on (a coroutine,
 * a signal stack) is neither painted nor scanned; its samples are still
 * taken whenever its stack pointer is within its stack. Threads still
 * running at exit, and processes that die of a signal, have only the
 * sampled maximum: their stacks are not read from another thread, which
 * could race with the stack being unmapped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent.h"

#define PAGE 4096u
/* The paint: a word a program is unlikely to write. */
#define PAINT 0xa5c3a5c3a5c3a5c3ull
/* Painting stops this far below the painter's own stack pointer: the
 * frames of what it calls go there. */
#define PAINT_MARGIN 1024u
/* The most of a thread's stack painted: what painting may cost a thread
 * whose stack has a stray resident page far below the others. (Such a
 * page, below it, would make the high-water mark too high.) */
#define PAINT_MAX (1u << 20)

static inline uintptr_t current_sp(void) { return (uintptr_t)__builtin_frame_address(0); }

/* The buffers of find_mapping and lowest_resident are not on the stack:
 * the scan would take them for the thread's own use of it. */
static mt_lock_t scratch_lock;
static char maps_buf[4096];
static unsigned char mincore_vec[4096];

/*
 * find_mapping reads /proc/self/maps, without touching the heap, for the
 * mapping that holds addr: its start and end, and the end of the mapping
 * before it (how far down a growing stack may go).
 */
static int find_mapping(uintptr_t addr, uintptr_t *start, uintptr_t *end, uintptr_t *prev_end)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	mt_lock(&scratch_lock);
	char *buf = maps_buf;
	/* field 0: start, 1: end, 2: skip to the end of the line */
	int field = 0, found = 0;
	uintptr_t lo = 0, hi = 0, before = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof maps_buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n && !found; i++) {
			char c = buf[i];
			if (field == 2) {
				if (c == '\n') {
					before = hi;
					field = 0, lo = 0, hi = 0;
				}
				continue;
			}
			int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			if (digit >= 0) {
				if (field == 0)
					lo = lo << 4 | (uintptr_t)digit;
				else
					hi = hi << 4 | (uintptr_t)digit;
			} else if (field == 0 && c == '-') {
				field = 1;
			} else {
				if (field == 1 && addr >= lo && addr < hi) {
					*start = lo, *end = hi, *prev_end = before;
					found = 1;
				}
				field = c == '\n' ? (before = hi, lo = 0, hi = 0, 0) : 2;
			}
		}
		if (found)
			break;
	}
	mt_unlock(&scratch_lock);
	close(fd);
	return found;
}

/* lowest_resident returns the start of the lowest resident page in
 * [lo, hi) (both page-aligned), or hi if there is none or mincore fails. */
static uintptr_t lowest_resident(uintptr_t lo, uintptr_t hi)
{
	unsigned char *vec = mincore_vec;
	uintptr_t found = hi;
	mt_lock(&scratch_lock);
	for (uintptr_t at = lo; at < hi && found == hi;) {
		uintptr_t len = hi - at;
		if (len > sizeof mincore_vec * PAGE)
			len = sizeof mincore_vec * PAGE;
		if (mincore((void *)at, len, vec) != 0)
			break;
		for (uintptr_t i = 0; i < len / PAGE; i++) {
			if (vec[i] & 1) {
				found = at + i * PAGE;
				break;
			}
		}
		at += len;
	}
	mt_unlock(&scratch_lock);
	return found;
}

/*
 * mt_stack_setup finds the calling thread's stack and paints it. The main
 * thread's base is the end of the mapping that holds its stack pointer,
 * read from /proc/self/maps: the [stack] mapping, whose top holds the
 * arguments, environment and auxiliary vector the kernel put there, which
 * are counted as in use as they are on every other thread's stack its
 * thread control block and TLS are. (__libc_stack_end would leave those
 * out, but it says nothing of how far the stack may grow, which painting
 * needs, and a fork child's main thread may run on a thread stack.)
 * Other threads ask pthread_getattr_np, which may allocate: the caller
 * has set t->internal, so those allocations pass through unrecorded.
 */
void mt_stack_setup(struct mt_thread *t, int main_thread)
{
	uintptr_t sp = current_sp();
	t->stack_lo = t->stack_hi = 0;
	t->stack_grows = 0;
	t->paint_lo = t->paint_hi = 0;
	if (!main_thread) {
		pthread_attr_t a;
		if (pthread_getattr_np(pthread_self(), &a) == 0) {
			void *addr;
			size_t size;
			if (pthread_attr_getstack(&a, &addr, &size) == 0) {
				t->stack_lo = (uintptr_t)addr;
				t->stack_hi = (uintptr_t)addr + size;
			}
			pthread_attr_destroy(&a);
		}
	}
	if (t->stack_hi == 0 || sp < t->stack_lo || sp >= t->stack_hi) {
		uintptr_t start, end, prev_end;
		if (!find_mapping(sp, &start, &end, &prev_end))
			return;
		t->stack_hi = end;
		t->stack_lo = start;
		if (main_thread) {
			/* The stack grows down to RLIMIT_STACK, or to the
			 * mapping below it. */
			struct rlimit rl;
			uintptr_t limit = prev_end;
			if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < end &&
			    end - rl.rlim_cur > limit)
				limit = end - (uintptr_t)rl.rlim_cur;
			t->stack_lo = limit < start ? limit : start;
			t->stack_grows = 1;
		}
	}
	/* Step 1: paint the resident pages below the stack pointer. */
	uintptr_t top = (sp - PAINT_MARGIN) & ~(uintptr_t)7;
	uintptr_t top_page = top & ~(uintptr_t)(PAGE - 1);
	uintptr_t floor = t->stack_lo;
	if (t->stack_grows) {
		/* Only the mapping as it is now: below it, nothing is
		 * resident, and touching it would grow the stack. */
		uintptr_t start, end, prev_end;
		if (!find_mapping(sp, &start, &end, &prev_end))
			return;
		floor = start;
	}
	if (top_page - floor > PAINT_MAX)
		floor = top_page - PAINT_MAX;
	if (top <= floor)
		return;
	uintptr_t lo = lowest_resident(floor, top_page);
	if (lo > top_page)
		lo = top_page;
	for (uint64_t *w = (uint64_t *)lo; (uintptr_t)w < top; w++)
		*(volatile uint64_t *)w = PAINT;
	t->paint_lo = lo;
	t->paint_hi = top;
}

/* untouched reports whether the word at w is still paint: the pattern in
 * the painted range, zero below it. */
static inline int untouched(const struct mt_thread *t, uintptr_t w)
{
	uint64_t v = *(const volatile uint64_t *)w;
	if (w >= t->paint_lo && w < t->paint_hi)
		return v == PAINT;
	return v == 0 && w < t->paint_lo;
}

/* mt_stack_high_water returns the calling thread's high-water mark in
 * bytes (step 2), or 0 if it cannot be known. */
uint64_t mt_stack_high_water(struct mt_thread *t)
{
	uintptr_t sp = current_sp();
	if (t->stack_hi == 0 || t->paint_hi == 0 || sp < t->stack_lo || sp >= t->stack_hi)
		return 0;
	uintptr_t floor = t->stack_lo;
	if (t->stack_grows) {
		uintptr_t start, end, prev_end;
		if (!find_mapping(sp, &start, &end, &prev_end) || end != t->stack_hi)
			return 0;
		floor = start;
	}
	uintptr_t sp_page = sp & ~(uintptr_t)(PAGE - 1);
	uintptr_t at = lowest_resident(floor, sp_page);
	for (; at < sp; at += 8) {
		if (!untouched(t, at))
			break;
	}
	if (at >= sp)
		return t->stack_hi - sp;
	/* The lowest byte of the word that is not paint. */
	uint64_t v = *(const volatile uint64_t *)at;
	uint64_t paint = at >= t->paint_lo && at < t->paint_hi ? PAINT : 0;
	unsigned k = 0;
	while (k < 7 && ((v ^ paint) >> (8 * k) & 0xff) == 0)
		k++;
	return t->stack_hi - (at + k);
}

/* mt_stack_after_fork frees the scratch buffers in a fork child: the
 * thread that held them in the parent is not in it. */
void mt_stack_after_fork(void) { scratch_lock.v = 0; }

/* mt_stack_record sends the calling thread's high-water mark, if it can be
 * known. */
void mt_stack_record(struct mt_thread *t)
{
	uint64_t hwm = mt_stack_high_water(t);
	if (hwm == 0)
		return;
	uint64_t rec[5] = {MT_REC_STACK | 5 << 8, mt_seq(), mt_tsc(), hwm, t->stack_hi - t->stack_lo};
	mt_emit(t, rec, 5);
}
