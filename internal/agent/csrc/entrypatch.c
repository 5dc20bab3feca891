/*
 * entrypatch.c: recording through the executable's own allocator.
 *
 * An executable that defines and exports malloc (see ownalloc.c) takes
 * every call to it, its own direct calls among them, which no symbol
 * binding can redirect. The agent instead rewrites the first bytes of each
 * such function into a jump to its own hook, and gives the hook, as the
 * "real" function, a trampoline: the function's first instructions, moved
 * and fixed up for their new address, then a jump back to the rest of it.
 * Every call, from the program or from libc, then passes through the hook
 * once and is served by the program's allocator.
 *
 * It is done only when asked (see asked), only where it is certainly
 * right, and otherwise not at all:
 *  1. only in the executable, once per program image, when the agent
 *     resolves its real functions (before main; a fork child inherits the
 *     patched code, an exec'd image starts fresh);
 *  2. only if every allocation function the executable defines can be
 *     given a hook (see choose_hook): a block allocated unseen and
 *     released seen, or the reverse, would make false leaks and invalid
 *     frees, so a program that also defines reallocarray (which the agent
 *     makes of realloc), or one function that both allocates and
 *     releases, is left as it is. The C functions go to the agent's own
 *     hooks, whose real functions become the program's; the operators,
 *     and a function that is several APIs at once (chromium's free is its
 *     operator delete), go to hooks that call the program's function;
 *  3. only if each function's first instructions are all of a small known
 *     set (see decode), span at least the 5 bytes of the jump, lie within
 *     the function's size, and end in no jump back into the patched bytes;
 *  4. only if the page of jumps to the hooks can be placed within 2 GiB of
 *     the functions, below the executable (above it the brk heap grows).
 * Otherwise ownalloc.c names the functions as not recorded. What it
 * cannot check: that no other code of the program jumps into the five
 * patched bytes, and that no other thread runs yet (before main, none
 * does unless a library's constructor started one).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent.h"

/* The hooks of the C functions, by names the program cannot take
 * (aliases in hooks.c). */
MT_HIDDEN void *mt_hook_malloc(size_t);
MT_HIDDEN void mt_hook_free(void *);
MT_HIDDEN void *mt_hook_calloc(size_t, size_t);
MT_HIDDEN void *mt_hook_realloc(void *, size_t);
MT_HIDDEN int mt_hook_posix_memalign(void **, size_t, size_t);
MT_HIDDEN void *mt_hook_aligned_alloc(size_t, size_t);
MT_HIDDEN void *mt_hook_memalign(size_t, size_t);
MT_HIDDEN void *mt_hook_valloc(size_t);
MT_HIDDEN void *mt_hook_pvalloc(size_t);

enum { PATCH_LEN = 5, TRAMP_SIZE = 96, STUB_SIZE = 16 };

/* The struct mt_real slots the program's C functions replace. */
enum { C_MALLOC, C_FREE, C_CALLOC, C_REALLOC, C_POSIX_MEMALIGN, C_ALIGNED_ALLOC, C_MEMALIGN, C_VALLOC, C_PVALLOC, NC };

/* How a function's calls are recorded: as an allocation of its first
 * argument's size, as a release of its first argument (both through an
 * operator's hook, or malloc's and free's), or only through its own C
 * hook. */
enum { S_ALLOC, S_FREE, S_C };
enum { FAM_MALLOC = 1, FAM_NEW = 2, FAM_NEW_ARRAY = 4 };

static const struct own_func {
	const char *name;
	int c;	  /* its struct mt_real slot, or -1 */
	int shape;
	int family;
	uint32_t api;
	void *hook; /* S_C, or malloc's and free's: the agent's C hook */
} funcs[] = {
	{"malloc", C_MALLOC, S_ALLOC, FAM_MALLOC, MT_API_MALLOC, (void *)mt_hook_malloc},
	{"free", C_FREE, S_FREE, FAM_MALLOC, MT_API_FREE, (void *)mt_hook_free},
	{"calloc", C_CALLOC, S_C, FAM_MALLOC, MT_API_CALLOC, (void *)mt_hook_calloc},
	{"realloc", C_REALLOC, S_C, FAM_MALLOC, MT_API_REALLOC, (void *)mt_hook_realloc},
	{"posix_memalign", C_POSIX_MEMALIGN, S_C, FAM_MALLOC, MT_API_POSIX_MEMALIGN, (void *)mt_hook_posix_memalign},
	{"aligned_alloc", C_ALIGNED_ALLOC, S_C, FAM_MALLOC, MT_API_ALIGNED_ALLOC, (void *)mt_hook_aligned_alloc},
	{"memalign", C_MEMALIGN, S_C, FAM_MALLOC, MT_API_MEMALIGN, (void *)mt_hook_memalign},
	{"valloc", C_VALLOC, S_C, FAM_MALLOC, MT_API_VALLOC, (void *)mt_hook_valloc},
	{"pvalloc", C_PVALLOC, S_C, FAM_MALLOC, MT_API_PVALLOC, (void *)mt_hook_pvalloc},
	{"_Znwm", -1, S_ALLOC, FAM_NEW, MT_API_NEW, NULL},
	{"_Znam", -1, S_ALLOC, FAM_NEW_ARRAY, MT_API_NEW_ARRAY, NULL},
	{"_ZnwmRKSt9nothrow_t", -1, S_ALLOC, FAM_NEW, MT_API_NEW_NOTHROW, NULL},
	{"_ZnamRKSt9nothrow_t", -1, S_ALLOC, FAM_NEW_ARRAY, MT_API_NEW_ARRAY_NOTHROW, NULL},
	{"_ZnwmSt11align_val_t", -1, S_ALLOC, FAM_NEW, MT_API_NEW_ALIGNED, NULL},
	{"_ZnamSt11align_val_t", -1, S_ALLOC, FAM_NEW_ARRAY, MT_API_NEW_ARRAY_ALIGNED, NULL},
	{"_ZnwmSt11align_val_tRKSt9nothrow_t", -1, S_ALLOC, FAM_NEW, MT_API_NEW_ALIGNED_NOTHROW, NULL},
	{"_ZnamSt11align_val_tRKSt9nothrow_t", -1, S_ALLOC, FAM_NEW_ARRAY, MT_API_NEW_ARRAY_ALIGNED_NOTHROW, NULL},
	{"_ZdlPv", -1, S_FREE, FAM_NEW, MT_API_DELETE, NULL},
	{"_ZdaPv", -1, S_FREE, FAM_NEW_ARRAY, MT_API_DELETE_ARRAY, NULL},
	{"_ZdlPvm", -1, S_FREE, FAM_NEW, MT_API_DELETE_SIZED, NULL},
	{"_ZdaPvm", -1, S_FREE, FAM_NEW_ARRAY, MT_API_DELETE_ARRAY_SIZED, NULL},
	{"_ZdlPvSt11align_val_t", -1, S_FREE, FAM_NEW, MT_API_DELETE_ALIGNED, NULL},
	{"_ZdaPvSt11align_val_t", -1, S_FREE, FAM_NEW_ARRAY, MT_API_DELETE_ARRAY_ALIGNED, NULL},
	{"_ZdlPvmSt11align_val_t", -1, S_FREE, FAM_NEW, MT_API_DELETE_SIZED_ALIGNED, NULL},
	{"_ZdaPvmSt11align_val_t", -1, S_FREE, FAM_NEW_ARRAY, MT_API_DELETE_ARRAY_SIZED_ALIGNED, NULL},
	{"_ZdlPvRKSt9nothrow_t", -1, S_FREE, FAM_NEW, MT_API_DELETE_NOTHROW, NULL},
	{"_ZdaPvRKSt9nothrow_t", -1, S_FREE, FAM_NEW_ARRAY, MT_API_DELETE_ARRAY_NOTHROW, NULL},
	{"_ZdlPvSt11align_val_tRKSt9nothrow_t", -1, S_FREE, FAM_NEW, MT_API_DELETE_ALIGNED_NOTHROW, NULL},
	{"_ZdaPvSt11align_val_tRKSt9nothrow_t", -1, S_FREE, FAM_NEW_ARRAY, MT_API_DELETE_ARRAY_ALIGNED_NOTHROW, NULL},
};
enum { NFUNCS = sizeof funcs / sizeof funcs[0] };
/* Each operator of its own address takes a hook slot (choose_hook): the
 * 20 operators above are 8 news and 12 deletes. */
_Static_assert(MT_OWN_HOOKS >= 12, "a hook slot for every operator delete");

/* The trampolines of the program's C functions, set once it is patched. */
static void *ctramp[NC];
static int patched;
void *mt_own_usable;

/* no_usable_size is mt_own_usable for a program that does not define
 * malloc_usable_size. */
static size_t no_usable_size(void *p)
{
	(void)p;
	return 0;
}

int mt_entry_patched(void) { return patched; }

/* ---- decoding ---- */

enum { I_COPY, I_RIPREL, I_JMP, I_CALL, I_JCC };

struct insn {
	int kind;
	size_t len;
	size_t disp_at;	 /* I_RIPREL: offset of the 32-bit displacement */
	uintptr_t target; /* I_JMP, I_CALL, I_JCC */
	uint8_t cond;	  /* I_JCC: its condition, the low 4 bits of the opcode */
};

/* modrm_len returns the length of a ModRM operand (ModRM, SIB,
 * displacement) at m, and sets *riprel when it is RIP-relative. */
static size_t modrm_len(const uint8_t *m, int *riprel)
{
	int mod = m[0] >> 6, rm = m[0] & 7;
	size_t n = 1;
	*riprel = 0;
	if (mod == 3)
		return n;
	if (rm == 4) {
		n++;
		if (mod == 0 && (m[1] & 7) == 5)
			return n + 4; /* no base: an absolute disp32 */
	}
	if (mod == 0 && rm == 5) {
		*riprel = 1;
		return n + 4;
	}
	return n + (mod == 1 ? 1 : mod == 2 ? 4 : 0);
}

/* decode reads the instruction at c (at address ip), of the few a
 * function's prologue or a wrapper's tail jump is made of: endbr64, push,
 * mov and lea (register, immediate or memory, RIP-relative fixed up), arithmetic
 * between registers or with an immediate (on a register or memory), jmp,
 * conditional jumps and call to a relative target. Anything
 * else, prefixes included, may depend on where it runs: 0, refused. */
static int decode(const uint8_t *c, uintptr_t ip, struct insn *in)
{
	size_t i = 0;
	in->kind = I_COPY;
	in->disp_at = 0;
	in->target = 0;
	in->cond = 0;
	if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa) {
		in->len = 4;
		return 1;
	}
	if (c[0] == 0xe9 || c[0] == 0xe8) {
		int32_t rel;
		memcpy(&rel, c + 1, 4);
		in->kind = c[0] == 0xe9 ? I_JMP : I_CALL;
		in->len = 5;
		in->target = ip + 5 + (intptr_t)rel;
		return 1;
	}
	if (c[0] == 0xeb) {
		in->kind = I_JMP;
		in->len = 2;
		in->target = ip + 2 + (intptr_t)(int8_t)c[1];
		return 1;
	}
	/* A conditional jump, short or near: a function that returns at
	 * once for a null pointer (jemalloc's sized operator delete begins
	 * test, je). */
	if (c[0] >= 0x70 && c[0] <= 0x7f) {
		in->kind = I_JCC;
		in->len = 2;
		in->cond = c[0] & 0xf;
		in->target = ip + 2 + (intptr_t)(int8_t)c[1];
		return 1;
	}
	if (c[0] == 0x0f && c[1] >= 0x80 && c[1] <= 0x8f) {
		int32_t rel;
		memcpy(&rel, c + 2, 4);
		in->kind = I_JCC;
		in->len = 6;
		in->cond = c[1] & 0xf;
		in->target = ip + 6 + (intptr_t)rel;
		return 1;
	}
	int rex = (c[0] & 0xf0) == 0x40;
	if (rex)
		i++;
	uint8_t op = c[i];
	if (op >= 0x50 && op <= 0x57 && (!rex || c[0] == 0x41)) {
		in->len = i + 1;
		return 1;
	}
	if (op == 0x89 || op == 0x8b || op == 0x8d) {
		int riprel;
		if (op == 0x8d && c[i + 1] >> 6 == 3)
			return 0;
		in->len = i + 1 + modrm_len(c + i + 1, &riprel);
		if (riprel) {
			in->kind = I_RIPREL;
			in->disp_at = i + 2;
		}
		return 1;
	}
	/* mov of an immediate to a register */
	if (op >= 0xb8 && op <= 0xbf) {
		in->len = i + 1 + (rex && (c[0] & 8) ? 8 : 4);
		return 1;
	}
	if (op == 0xc7 && c[i + 1] >> 6 == 3 && ((c[i + 1] >> 3) & 7) == 0) {
		in->len = i + 2 + 4;
		return 1;
	}
	/* add, or, and, sub, xor, cmp, test between registers */
	if ((op == 0x01 || op == 0x03 || op == 0x09 || op == 0x0b || op == 0x21 || op == 0x23 || op == 0x29 ||
	     op == 0x2b || op == 0x31 || op == 0x33 || op == 0x39 || op == 0x3b || op == 0x85) &&
	    c[i + 1] >> 6 == 3) {
		in->len = i + 2;
		return 1;
	}
	/* not, neg, mul, imul of a register */
	if (op == 0xf7 && c[i + 1] >> 6 == 3 && ((c[i + 1] >> 3) & 7) >= 2) {
		in->len = i + 2;
		return 1;
	}
	/* arithmetic (add, or, adc, sbb, and, sub, xor, cmp) with an
	 * immediate, on a register or memory (a counter) */
	if (op == 0x83 || op == 0x81) {
		int riprel;
		in->len = i + 1 + modrm_len(c + i + 1, &riprel) + (op == 0x83 ? 1 : 4);
		if (riprel) {
			in->kind = I_RIPREL;
			in->disp_at = i + 2;
		}
		return 1;
	}
	return 0;
}

/* put_abs writes an indirect jump (0xff /4) or call (0xff /2) through
 * the 8 bytes after it, to target; the call jumps over them on return. */
static size_t put_abs(uint8_t *p, int call, uintptr_t target)
{
	static const uint8_t jmp[6] = {0xff, 0x25, 0, 0, 0, 0};
	static const uint8_t callq[8] = {0xff, 0x15, 2, 0, 0, 0, 0xeb, 8};
	size_t n = call ? sizeof callq : sizeof jmp;
	memcpy(p, call ? callq : jmp, n);
	memcpy(p + n, &target, 8);
	return n + 8;
}

/* relocate writes at t the trampoline of the function at f, of size
 * size: its first instructions, up to at least PATCH_LEN bytes, then a
 * jump to the rest. It returns 0 if that cannot be done safely. */
static int relocate(const uint8_t *f, size_t size, uint8_t *t)
{
	size_t at = 0, out = 0;
	while (at < PATCH_LEN) {
		struct insn in;
		if (!decode(f + at, (uintptr_t)(f + at), &in) || at + in.len > size || out + in.len + 16 > TRAMP_SIZE - 14)
			return 0;
		switch (in.kind) {
		case I_COPY:
			memcpy(t + out, f + at, in.len);
			out += in.len;
			break;
		case I_RIPREL: {
			int32_t disp;
			memcpy(&disp, f + at + in.disp_at, 4);
			intptr_t target = (intptr_t)(f + at + in.len) + disp;
			intptr_t moved = target - (intptr_t)(t + out + in.len);
			if (moved != (int32_t)moved)
				return 0;
			disp = (int32_t)moved;
			memcpy(t + out, f + at, in.len);
			memcpy(t + out + in.disp_at, &disp, 4);
			out += in.len;
			break;
		}
		case I_CALL:
			out += put_abs(t + out, 1, in.target);
			break;
		case I_JCC:
			/* The opposite condition skips an absolute jump to the
			 * target, which must not be a byte the patch covers. */
			if (in.target >= (uintptr_t)f && in.target < (uintptr_t)f + PATCH_LEN)
				return 0;
			t[out] = (uint8_t)(0x70 | (in.cond ^ 1));
			t[out + 1] = 14; /* put_abs's jump: 6 bytes and its target */
			out += 2;
			out += put_abs(t + out, 0, in.target);
			break;
		case I_JMP:
			/* Control does not come back: the bytes after the jump
			 * are another path's, which the patch must not cover,
			 * nor may the jump lead back into the patched bytes. */
			if (at + in.len < PATCH_LEN ||
			    (in.target >= (uintptr_t)f && in.target < (uintptr_t)f + at + in.len))
				return 0;
			put_abs(t + out, 0, in.target);
			return 1;
		}
		at += in.len;
	}
	put_abs(t + out, 0, (uintptr_t)(f + at));
	return 1;
}

/* ---- calling the program's functions ---- */

/* mt_own_call calls the program's function f (through its trampoline)
 * with the thread marked internal: a program's calloc may call its own
 * malloc, now a hook, which finds the thread busy in the outer hook and
 * must neither record the call nor count it lost. A program's operator
 * new may throw: the exception then leaves the hook without its clearing
 * the thread's busy flag, and the next call finds it set. So the call
 * notes where its return address is, and what it is: while the call
 * runs, both hold, and a nested call's frame is below it (see
 * mt_own_abandoned). */
__attribute__((noinline)) uintptr_t mt_own_call(void *f, uintptr_t a0, uintptr_t a1, uintptr_t a2)
{
	struct mt_thread *t = NULL;
	if (__atomic_load_n(&mt_proc.state, __ATOMIC_ACQUIRE) == MT_STATE_ACTIVE)
		t = mt_self();
	if (t == NULL)
		return ((uintptr_t(*)(uintptr_t, uintptr_t, uintptr_t))f)(a0, a1, a2);
	uint32_t internal = t->internal;
	uintptr_t *slot = t->own_slot, ret = t->own_ret;
	t->internal = 1;
	t->own_slot = (uintptr_t *)__builtin_frame_address(0) + 1;
	t->own_ret = (uintptr_t)__builtin_return_address(0);
	uintptr_t r = ((uintptr_t(*)(uintptr_t, uintptr_t, uintptr_t))f)(a0, a1, a2);
	t->internal = internal;
	t->own_slot = slot;
	t->own_ret = ret;
	return r;
}

/* mt_own_abandoned reports whether thread t, found busy by the hook of
 * frame hook_frame, was left so by an exception thrown through a call to
 * the program's function; it then clears the thread's state as the hook
 * would have. A hook nested in the call runs below the call's frame. One
 * called after the throw, from the frame that caught it or one above, is
 * above it: the frames of the abandoned call were below the catcher's.
 * Only a hook called from deeper down after the catch is below it too,
 * and then the return address in the call's slot tells, unless the
 * frames since left that word as it was. (The frame of a function called
 * from the hook would not do: the hooks keep small frames, and below
 * them the abandoned call's words are often still there.) */
int mt_own_abandoned(struct mt_thread *t, const void *hook_frame)
{
	uintptr_t *slot = t->own_slot;
	if (slot == NULL)
		return 0;
	if ((uintptr_t)hook_frame < (uintptr_t)slot && *slot == t->own_ret)
		return 0;
	t->own_slot = NULL;
	t->own_ret = 0;
	t->internal = 0;
	t->busy = 0;
	return 1;
}

static void *own_malloc(size_t n) { return (void *)mt_own_call(ctramp[C_MALLOC], n, 0, 0); }
static void own_free(void *p) { mt_own_call(ctramp[C_FREE], (uintptr_t)p, 0, 0); }
static void *own_calloc(size_t n, size_t size) { return (void *)mt_own_call(ctramp[C_CALLOC], n, size, 0); }
static void *own_realloc(void *p, size_t n) { return (void *)mt_own_call(ctramp[C_REALLOC], (uintptr_t)p, n, 0); }
static int own_posix_memalign(void **out, size_t align, size_t n)
{
	return (int)mt_own_call(ctramp[C_POSIX_MEMALIGN], (uintptr_t)out, align, n);
}
static void *own_aligned_alloc(size_t align, size_t n) { return (void *)mt_own_call(ctramp[C_ALIGNED_ALLOC], align, n, 0); }
static void *own_memalign(size_t align, size_t n) { return (void *)mt_own_call(ctramp[C_MEMALIGN], align, n, 0); }
static void *own_valloc(size_t n) { return (void *)mt_own_call(ctramp[C_VALLOC], n, 0, 0); }
static void *own_pvalloc(size_t n) { return (void *)mt_own_call(ctramp[C_PVALLOC], n, 0, 0); }

/* ---- patching ---- */

/* place_page maps one page within reach of a rel32 jump from every
 * address in [lo, hi), below the executable's lowest address lo. */
static uint8_t *place_page(uintptr_t lo, uintptr_t hi)
{
	long page = sysconf(_SC_PAGESIZE);
	for (uintptr_t step = 1; step <= 64; step++) {
		uintptr_t at = (lo & ~(uintptr_t)(page - 1)) - step * ((uintptr_t)1 << 20);
		if (at >= lo || hi - at >= (uintptr_t)1 << 31)
			return NULL;
		void *p = mmap((void *)at, (size_t)page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (p == MAP_FAILED)
			continue;
		if ((uintptr_t)p == at)
			return p;
		munmap(p, (size_t)page); /* a kernel before 4.17 took it as a hint */
	}
	return NULL;
}

static int write_code(uint8_t *at, const uint8_t *code, size_t n)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t from = (uintptr_t)at & ~(page - 1), to = ((uintptr_t)at + n + page - 1) & ~(page - 1);
	if (mprotect((void *)from, to - from, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
		return 0;
	memcpy(at, code, n);
	__builtin___clear_cache((char *)at, (char *)at + n);
	return mprotect((void *)from, to - from, PROT_READ | PROT_EXEC) == 0;
}

/* One address the executable defines allocation functions at: several
 * names may be one function (chromium's free is its operator delete). */
struct site {
	uint8_t *at;
	size_t size;
	int first;    /* index in funcs of its first name */
	int shapes;   /* 1 << shape of each name */
	int families; /* FAM_ of each name */
	void *hook;
	uint8_t *tramp, *stub;
	uint8_t orig[PATCH_LEN];
};

/* find_sites fills sites with the executable's allocation functions and
 * returns how many, or -1 if one of them cannot be patched. */
static int find_sites(const void *exe_base, struct site *sites, uintptr_t *hi)
{
	int n = 0;
	size_t nhooked;
	const char *const *hooked = mt_hooked_names(&nhooked);
	for (size_t i = 0; i < nhooked; i++) {
		Dl_info info;
		const ElfW(Sym) *sym = NULL;
		void *f = dlsym(RTLD_DEFAULT, hooked[i]);
		if (!mt_is_definition(f) || !dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) || info.dli_fbase != exe_base)
			continue;
		int k = 0;
		while (k < NFUNCS && strcmp(funcs[k].name, hooked[i]) != 0)
			k++;
		/* reallocarray, which the agent implements with realloc; and a
		 * function of unknown size might end within the patch. */
		if (k == NFUNCS || sym == NULL || sym->st_size < PATCH_LEN)
			return -1;
		int s = 0;
		while (s < n && sites[s].at != f)
			s++;
		if (s == n) {
			memset(&sites[n], 0, sizeof sites[n]);
			sites[n].at = f;
			sites[n].size = sym->st_size;
			sites[n].first = k;
			if ((uintptr_t)f + sym->st_size > *hi)
				*hi = (uintptr_t)f + sym->st_size;
			n++;
		}
		sites[s].shapes |= 1 << funcs[k].shape;
		sites[s].families |= funcs[k].family;
	}
	return n;
}

/* choose_hook gives site s the hook its calls go to: the agent's own C
 * hook for C functions of one API, else a slot of an operator's hook,
 * recorded as one API (or as one function of several). It returns 0 if no
 * hook fits: a function both allocating and releasing, or calloc that is
 * also operator new. */
static int choose_hook(struct site *s, int *news, int *deletes)
{
	const struct own_func *f = &funcs[s->first];
	int shared = s->families & (s->families - 1);
	if (s->shapes & (1 << S_C))
		return s->shapes == 1 << S_C && !shared ? (s->hook = f->hook, 1) : 0;
	if (s->shapes == (1 << S_ALLOC | 1 << S_FREE))
		return 0;
	if (f->hook != NULL && !shared) {
		s->hook = f->hook;
		return 1;
	}
	int alloc = s->shapes == 1 << S_ALLOC;
	int *used = alloc ? news : deletes;
	if (*used == MT_OWN_HOOKS)
		return 0;
	struct mt_own_hook *h = alloc ? &mt_own_new[*used] : &mt_own_delete[*used];
	h->api = shared ? MT_API_SHARED : f->api;
	h->real = s->tramp;
	s->hook = alloc ? mt_own_new_hooks[*used] : mt_own_delete_hooks[*used];
	++*used;
	return 1;
}

/* asked reports whether the recorder asked for patching: it does unless
 * told not to (memtrail run -patch-own-allocator=false), as a user may
 * want when what the program's allocator gives out before the agent
 * starts, or by ways other than its exported functions (chromium's), and
 * is then not seen, matters more. Once libc has started, getenv works: the agent
 * resolves its functions before then only for a call to one of its own
 * hooks, which a program that defines them all does not make. */
static int asked(void)
{
	const char *v = getenv("MEMTRAIL_PATCH_OWN_ALLOC");
	return v != NULL && strcmp(v, "1") == 0;
}

/* mt_entry_patch patches the executable's own allocation functions if it
 * can (see the file's comment), and replaces the real functions in r with
 * the program's. It runs once, while the agent resolves them. */
void mt_entry_patch(struct mt_real *r)
{
	Dl_info exe;
	if (!asked() || !dladdr((void *)getauxval(AT_PHDR), &exe) || exe.dli_fbase == NULL)
		return;
	struct site sites[NFUNCS];
	uintptr_t lo = (uintptr_t)exe.dli_fbase, hi = lo;
	int n = find_sites(exe.dli_fbase, sites, &hi);
	if (n <= 0)
		return;
	long pagesize = sysconf(_SC_PAGESIZE);
	if ((size_t)n * (TRAMP_SIZE + STUB_SIZE) > (size_t)pagesize)
		return;
	uint8_t *page = place_page(lo, hi);
	if (page == NULL)
		return;
	/* First every trampoline and hook, so that a refusal leaves the
	 * program as it was. */
	int news = 0, deletes = 0;
	for (int i = 0; i < n; i++) {
		struct site *s = &sites[i];
		s->tramp = page + (size_t)i * (TRAMP_SIZE + STUB_SIZE);
		s->stub = s->tramp + TRAMP_SIZE;
		if (!relocate(s->at, s->size, s->tramp) || !choose_hook(s, &news, &deletes)) {
			munmap(page, (size_t)pagesize);
			memset(mt_own_new, 0, sizeof mt_own_new);
			memset(mt_own_delete, 0, sizeof mt_own_delete);
			return;
		}
		put_abs(s->stub, 0, (uintptr_t)s->hook);
	}
	if (mprotect(page, (size_t)pagesize, PROT_READ | PROT_EXEC) != 0) {
		munmap(page, (size_t)pagesize);
		return;
	}
	for (int i = 0; i < n; i++) {
		struct site *s = &sites[i];
		uint8_t jump[PATCH_LEN] = {0xe9};
		int32_t rel = (int32_t)((intptr_t)s->stub - (intptr_t)(s->at + PATCH_LEN));
		memcpy(jump + 1, &rel, 4);
		memcpy(s->orig, s->at, PATCH_LEN);
		if (write_code(s->at, jump, PATCH_LEN))
			continue;
		/* Half the functions patched would see blocks come or go
		 * unseen: undo those done (the trampolines stay mapped, in
		 * case a call is on its way through one). */
		for (int j = 0; j < i; j++)
			(void)write_code(sites[j].at, sites[j].orig, PATCH_LEN);
		return;
	}
	/* The agent's hooks, its operators among them, call the program's
	 * functions as the real ones from now on. */
	void *own[NC] = {(void *)own_malloc,	   (void *)own_free,	 (void *)own_calloc,
			 (void *)own_realloc,	   (void *)own_posix_memalign, (void *)own_aligned_alloc,
			 (void *)own_memalign,	   (void *)own_valloc,	 (void *)own_pvalloc};
	void **slot[NC] = {(void **)&r->malloc,	(void **)&r->free,	   (void **)&r->calloc,
			   (void **)&r->realloc,	(void **)&r->posix_memalign, (void **)&r->aligned_alloc,
			   (void **)&r->memalign,	(void **)&r->valloc,	   (void **)&r->pvalloc};
	for (int i = 0; i < n; i++)
		for (int k = 0; k < NFUNCS; k++)
			if (funcs[k].c >= 0 && dlsym(RTLD_DEFAULT, funcs[k].name) == (void *)sites[i].at)
				ctramp[funcs[k].c] = sites[i].tramp;
	for (int c = 0; c < NC; c++)
		if (ctramp[c] != NULL)
			*slot[c] = own[c];
	/* The hooks size new and freed blocks with malloc_usable_size
	 * (hooks.c), which must be the allocator's own. */
	Dl_info u;
	void *usable = dlsym(RTLD_DEFAULT, "malloc_usable_size");
	if (usable == NULL || !dladdr(usable, &u) || u.dli_fbase != exe.dli_fbase)
		usable = (void *)no_usable_size;
	mt_own_usable = usable;
	patched = 1;
}
