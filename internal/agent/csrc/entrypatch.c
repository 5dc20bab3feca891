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
 * It is done only where it is certainly right, and otherwise not at all:
 *  1. only in the executable, once per program image, when the agent
 *     resolves its real functions (before main; a fork child inherits the
 *     patched code, an exec'd image starts fresh);
 *  2. only if every allocation function the executable defines is one
 *     whose hook calls a replaceable real function (the C ones): a block
 *     allocated unseen and released seen, or the reverse, would make false
 *     leaks and invalid frees, so a program that also defines operator new
 *     or reallocarray is left as it is;
 *  3. only if each function's first instructions are all of a small known
 *     set (see decode), span at least the 5 bytes of the jump, lie within
 *     the function's size, and end in no jump back into the patched bytes;
 *  4. only if the page of jumps to the hooks can be placed within 2 GiB of
 *     the functions, below the executable (above it the brk heap grows).
 * Otherwise ownalloc.c names the functions as not recorded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent.h"

/* The hooks, by names the program cannot take (aliases in hooks.c). */
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

/* The functions the agent can patch, in the order of struct mt_real's
 * slots they replace. */
enum { F_MALLOC, F_FREE, F_CALLOC, F_REALLOC, F_POSIX_MEMALIGN, F_ALIGNED_ALLOC, F_MEMALIGN, F_VALLOC, F_PVALLOC, NFUNCS };
static const char *const names[NFUNCS] = {"malloc", "free", "calloc", "realloc", "posix_memalign",
					  "aligned_alloc", "memalign", "valloc", "pvalloc"};
static void *const hooks[NFUNCS] = {
	(void *)mt_hook_malloc,		(void *)mt_hook_free,	  (void *)mt_hook_calloc,
	(void *)mt_hook_realloc,	(void *)mt_hook_posix_memalign, (void *)mt_hook_aligned_alloc,
	(void *)mt_hook_memalign,	(void *)mt_hook_valloc,	  (void *)mt_hook_pvalloc,
};

/* The trampolines, set once the executable is patched. */
static void *tramp[NFUNCS];
static int patched;

int mt_entry_patched(void) { return patched; }

/* ---- decoding ---- */

enum { I_COPY, I_RIPREL, I_JMP, I_CALL };

struct insn {
	int kind;
	size_t len;
	size_t disp_at;	 /* I_RIPREL: offset of the 32-bit displacement */
	uintptr_t target; /* I_JMP, I_CALL */
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
 * mov and lea (register or memory, RIP-relative fixed up), arithmetic
 * between registers, add or sub of an immediate (to a register or
 * memory), jmp and call to a relative target. Anything
 * else, prefixes included, may depend on where it runs: 0, refused. */
static int decode(const uint8_t *c, uintptr_t ip, struct insn *in)
{
	size_t i = 0;
	in->kind = I_COPY;
	in->disp_at = 0;
	in->target = 0;
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
	/* add or sub of an immediate, to a register or memory (a counter) */
	if (op == 0x83 || op == 0x81) {
		int reg = (c[i + 1] >> 3) & 7, riprel;
		if (reg != 0 && reg != 5)
			return 0;
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

/* ---- the wrappers the hooks call as the real functions ---- */

/* A program's calloc may call its own malloc, now the agent's hook. The
 * thread is busy in the outer hook, so the inner call is not recorded;
 * marking the thread internal says it is not an event lost either. */
static struct mt_thread *own_begin(uint32_t *saved)
{
	struct mt_thread *t = NULL;
	if (__atomic_load_n(&mt_proc.state, __ATOMIC_ACQUIRE) == MT_STATE_ACTIVE)
		t = mt_self();
	if (t != NULL) {
		*saved = t->internal;
		t->internal = 1;
	}
	return t;
}

static void own_end(struct mt_thread *t, uint32_t saved)
{
	if (t != NULL)
		t->internal = saved;
}

#define OWN(ret, name, id, params, args)                          \
	static ret own_##name params                              \
	{                                                         \
		uint32_t saved = 0;                               \
		struct mt_thread *t = own_begin(&saved);          \
		ret r = ((ret(*) params)tramp[id]) args;          \
		own_end(t, saved);                                \
		return r;                                         \
	}

OWN(void *, malloc, F_MALLOC, (size_t n), (n))
OWN(void *, calloc, F_CALLOC, (size_t n, size_t size), (n, size))
OWN(void *, realloc, F_REALLOC, (void *p, size_t n), (p, n))
OWN(int, posix_memalign, F_POSIX_MEMALIGN, (void **out, size_t align, size_t n), (out, align, n))
OWN(void *, aligned_alloc, F_ALIGNED_ALLOC, (size_t align, size_t n), (align, n))
OWN(void *, memalign, F_MEMALIGN, (size_t align, size_t n), (align, n))
OWN(void *, valloc, F_VALLOC, (size_t n), (n))
OWN(void *, pvalloc, F_PVALLOC, (size_t n), (n))

static void own_free(void *p)
{
	uint32_t saved = 0;
	struct mt_thread *t = own_begin(&saved);
	((void (*)(void *))tramp[F_FREE])(p);
	own_end(t, saved);
}

/* ---- patching ---- */

/* defines_others reports whether the executable defines an allocation
 * function the agent hooks but cannot patch (see ownalloc.c's list). */
static int defines_others(const void *exe_base)
{
	size_t n;
	const char *const *all = mt_hooked_names(&n);
	for (size_t i = 0; i < n; i++) {
		int ours = 0;
		for (int k = 0; k < NFUNCS; k++)
			ours |= strcmp(all[i], names[k]) == 0;
		Dl_info info;
		void *f = dlsym(RTLD_DEFAULT, all[i]);
		if (!ours && f != NULL && dladdr(f, &info) && info.dli_fbase == exe_base)
			return 1;
	}
	return 0;
}

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

/* mt_entry_patch patches the executable's own allocation functions if it
 * can (see the file's comment), and replaces the real functions in r with
 * the program's. It runs once, while the agent resolves them. */
void mt_entry_patch(struct mt_real *r)
{
	Dl_info exe;
	if (!dladdr((void *)getauxval(AT_PHDR), &exe) || exe.dli_fbase == NULL)
		return;
	uint8_t *fn[NFUNCS] = {0};
	size_t size[NFUNCS] = {0};
	uintptr_t lo = (uintptr_t)exe.dli_fbase, hi = lo;
	int any = 0;
	for (int k = 0; k < NFUNCS; k++) {
		Dl_info info;
		const ElfW(Sym) *sym = NULL;
		void *f = dlsym(RTLD_DEFAULT, names[k]);
		if (f == NULL || !dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) || info.dli_fbase != exe.dli_fbase)
			continue;
		/* A function of unknown size might end within the patch. */
		if (sym == NULL || sym->st_size < PATCH_LEN)
			return;
		fn[k] = f;
		size[k] = sym->st_size;
		if ((uintptr_t)f + size[k] > hi)
			hi = (uintptr_t)f + size[k];
		any = 1;
	}
	if (!any || defines_others(exe.dli_fbase))
		return;
	uint8_t *page = place_page(lo, hi);
	if (page == NULL)
		return;
	/* First every trampoline, so that a refusal leaves the program as it
	 * was. Aliases (memalign and aligned_alloc at one address) share the
	 * first one's trampoline and hook. */
	size_t used = 0;
	uint8_t *stub[NFUNCS] = {0};
	for (int k = 0; k < NFUNCS; k++) {
		if (fn[k] == NULL)
			continue;
		int alias = -1;
		for (int j = 0; j < k; j++)
			if (fn[j] == fn[k])
				alias = j;
		if (alias >= 0) {
			tramp[k] = tramp[alias];
			continue;
		}
		uint8_t *t = page + used;
		if (!relocate(fn[k], size[k], t)) {
			munmap(page, (size_t)sysconf(_SC_PAGESIZE));
			return;
		}
		tramp[k] = t;
		stub[k] = t + TRAMP_SIZE;
		put_abs(stub[k], 0, (uintptr_t)hooks[k]);
		used += TRAMP_SIZE + STUB_SIZE;
	}
	if (mprotect(page, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_EXEC) != 0) {
		munmap(page, (size_t)sysconf(_SC_PAGESIZE));
		return;
	}
	uint8_t orig[NFUNCS][PATCH_LEN];
	for (int k = 0; k < NFUNCS; k++) {
		if (stub[k] == NULL)
			continue;
		uint8_t jump[PATCH_LEN] = {0xe9};
		int32_t rel = (int32_t)((intptr_t)stub[k] - (intptr_t)(fn[k] + PATCH_LEN));
		memcpy(jump + 1, &rel, 4);
		memcpy(orig[k], fn[k], PATCH_LEN);
		if (write_code(fn[k], jump, PATCH_LEN))
			continue;
		/* Half the functions patched would see blocks come or go
		 * unseen: undo those done (the trampolines stay mapped, in
		 * case a call is on its way through one). */
		for (int j = 0; j < k; j++)
			if (stub[j] != NULL)
				(void)write_code(fn[j], orig[j], PATCH_LEN);
		memset(tramp, 0, sizeof tramp);
		return;
	}
	void *own[NFUNCS] = {(void *)own_malloc,	 (void *)own_free,     (void *)own_calloc,
			     (void *)own_realloc,	 (void *)own_posix_memalign, (void *)own_aligned_alloc,
			     (void *)own_memalign,	 (void *)own_valloc,   (void *)own_pvalloc};
	void **slot[NFUNCS] = {(void **)&r->malloc,	    (void **)&r->free,	      (void **)&r->calloc,
			       (void **)&r->realloc,	    (void **)&r->posix_memalign, (void **)&r->aligned_alloc,
			       (void **)&r->memalign,	    (void **)&r->valloc,       (void **)&r->pvalloc};
	for (int k = 0; k < NFUNCS; k++)
		if (tramp[k] != NULL)
			*slot[k] = own[k];
	patched = 1;
}
