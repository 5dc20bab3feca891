/*
 * calls.c: the stack in use at every function entry and return, for
 * programs built with -finstrument-functions (memtrail run -stack-calls).
 *
 * gcc and clang make every instrumented function call
 * __cyg_profile_func_enter once its prologue has made its frame, and
 * __cyg_profile_func_exit before its epilogue takes the frame down. glibc
 * exports both as functions that do nothing; the preloaded agent's come
 * first. Unless the recorder asked for them (mt_header.calls_window), they
 * return at once: a program built for exact mode runs under plain
 * `memtrail run` as it runs alone, a call into a function that returns.
 *
 * With them, each call measures the stack in use: the thread's base minus
 * the stack pointer of the function entered or returning, its whole frame
 * included. A record per call would cost the program and the trace as
 * much as the calls themselves, so per thread:
 *
 *  1. The calls of a window (mt_header.calls_window time-stamp counter
 *     ticks, the trace's time unit) are summed up: the deepest stack in
 *     use, the latest, their count. The first call or heap event of a
 *     later window, or the thread's end, publishes them in a CALLS record.
 *  2. An entry deeper than every one before it in the thread is noted
 *     (its depth and time), and its call stack is taken at the next
 *     return. That return is the entry's own function's: a call from it
 *     would have been deeper still. Its frames are all still on the stack
 *     there, so the stack is the one of the deepest entry; a recursion
 *     going down takes one stack at its turning point, not one per level.
 *     The unwinder's stack pointer of each frame gives the frame's size,
 *     which goes into the DEEPEST record with the stack.
 */
#include "agent.h"

#define EXPORT __attribute__((visibility("default"), no_instrument_function))
#define FRAME ((uintptr_t *)__builtin_frame_address(0))

uint64_t mt_calls_window;

void mt_calls_reset(struct mt_thread *t)
{
	t->calls_until = t->calls_last = t->calls_max = t->calls_level = t->calls_n = 0;
	t->deep_bytes = t->deep_time = 0;
	t->deep_pending = 0;
}

/* flush publishes the window's calls, if it had any. */
static void flush(struct mt_thread *t)
{
	if (t->calls_n == 0)
		return;
	uint64_t rec[6] = {MT_REC_CALLS | 6 << 8, mt_seq(), t->calls_last, t->calls_max, t->calls_level, t->calls_n};
	mt_emit(t, rec, 6);
	t->calls_n = 0;
	t->calls_max = 0;
}

/* mt_calls_due publishes the calls of a window that has ended. */
void mt_calls_due(struct mt_thread *t)
{
	if (mt_tsc() >= t->calls_until)
		flush(t);
}

/* emit_deepest publishes the deepest entry, with the stack just taken
 * (its innermost max_frames frames) or, if taken is 0, without one. A
 * stack cut short by the depth limit gives its outermost recorded frame no
 * size: the frame above it is not in the trace. */
static void emit_deepest(struct mt_thread *t, int taken)
{
	uint64_t rec[5 + MT_MAX_FRAMES_LIMIT / 2] = {0};
	uint32_t n = 0, stack = 0;
	if (taken) {
		stack = t->stack_id;
		int depth = (int)t->depth;
		int sized = mt_stack_cut(t) ? (int)mt_proc.max_frames - 1 : depth;
		for (int i = depth - 1; i >= depth - sized; i--) {
			uintptr_t above = i > 0 ? t->frame[i - 1].sp : t->stack_hi;
			uint64_t size = above > t->frame[i].sp ? above - t->frame[i].sp : 0;
			if (size > 0xffffffffu)
				size = 0xffffffffu;
			rec[5 + n / 2] |= size << (32 * (n % 2));
			n++;
		}
	}
	unsigned words = 5 + (n + 1) / 2;
	rec[0] = MT_REC_DEEPEST | (uint64_t)words << 8 | (uint64_t)stack << MT_STACK_SHIFT;
	rec[1] = mt_seq();
	rec[2] = t->deep_time;
	rec[3] = t->deep_bytes;
	rec[4] = n;
	mt_emit(t, rec, words);
}

/* mt_calls_end publishes what the thread's calls left to say, as it ends
 * or its process exits: a deepest entry whose function never returned
 * (it called exit, or longjmp left it) goes without its stack. */
void mt_calls_end(struct mt_thread *t)
{
	if (t->deep_pending) {
		emit_deepest(t, 0);
		t->deep_pending = 0;
	}
	flush(t);
}

/* calls_thread returns the calling thread's state, marked busy, or NULL.
 * A call made while the thread is in the agent (a signal handler's) is
 * not an event lost: it is left out. */
static inline struct mt_thread *calls_thread(void)
{
	if (__atomic_load_n(&mt_proc.state, __ATOMIC_ACQUIRE) != MT_STATE_ACTIVE)
		return NULL;
	struct mt_thread *t = mt_self();
	if (t != NULL && t->busy)
		return NULL;
	return mt_enter();
}

/* note counts a call with the given stack in use (step 1). */
static inline void note(struct mt_thread *t, uint64_t use, uint64_t now)
{
	if (MT_UNLIKELY(now >= t->calls_until)) {
		flush(t);
		t->calls_until = now + mt_calls_window;
	}
	t->calls_last = now;
	t->calls_level = use;
	if (use > t->calls_max)
		t->calls_max = use;
	t->calls_n++;
}

/* on_call handles an entry or a return of the function whose stack
 * pointer, at its call of the hook, is frame + 2. */
__attribute__((noinline, no_instrument_function)) static void on_call(uintptr_t *frame, int entry)
{
	struct mt_thread *t = calls_thread();
	if (t == NULL)
		return;
	uintptr_t sp = (uintptr_t)(frame + 2);
	if (MT_LIKELY(sp > t->stack_lo && sp <= t->stack_hi)) {
		uint64_t use = t->stack_hi - sp, now = mt_tsc();
		note(t, use, now);
		if (entry && use > t->deep_bytes) {
			t->deep_bytes = use, t->deep_time = now;
			t->deep_pending = 1;
		} else if (!entry && t->deep_pending) {
			/* Step 2: the frames of the deepest entry. */
			mt_capture_stack(t, frame);
			emit_deepest(t, 1);
			t->deep_pending = 0;
		}
	}
	mt_leave(t);
}

EXPORT void __cyg_profile_func_enter(void *fn, void *site)
{
	(void)fn, (void)site;
	if (MT_LIKELY(__atomic_load_n(&mt_calls_window, __ATOMIC_RELAXED) == 0))
		return;
	on_call(FRAME, 1);
}

EXPORT void __cyg_profile_func_exit(void *fn, void *site)
{
	(void)fn, (void)site;
	if (MT_LIKELY(__atomic_load_n(&mt_calls_window, __ATOMIC_RELAXED) == 0))
		return;
	on_call(FRAME, 0);
}
