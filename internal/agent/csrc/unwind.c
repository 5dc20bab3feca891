/*
 * unwind.c: call stacks from the .eh_frame call-frame information.
 *
 * Frame pointers cannot be trusted (Debian builds its libraries without
 * them), and glibc's _Unwind_Backtrace is far too slow to run on every
 * allocation. This unwinder is fast for three reasons:
 *
 *  1. Rules are cached per return address. On x86-64 nearly every frame is
 *     "CFA = rsp or rbp + offset, return address at CFA-8, rbp saved at
 *     CFA-8k or untouched", which packs into one 64-bit word. A miss
 *     interprets the FDE's CFA program once (binary search of
 *     .eh_frame_hdr), a hit costs one load from a direct-mapped cache.
 *  2. The outer part of the stack rarely changes between two events of a
 *     thread. Once a frame matches the previous stack's frame at the same
 *     stack address, the saved return addresses of all outer frames are
 *     compared with the previous ones; if they all still hold, the rest
 *     of the stack is the previous one and need not be unwound again.
 *  3. The stack is interned as a path in a tree (stacks.c); the unchanged
 *     outer part keeps its node, so only the new inner frames are looked
 *     up.
 */
#include <string.h>

#include "agent.h"

/* A rule, packed: bits 0-23 CFA offset (signed), 24-25 CFA kind, 26-31 the
 * slot k of the saved rbp (at CFA-8k; 0: rbp unchanged), 32-47 the module
 * slot (NO_MODULE: the address is in no module), 48-63 the module
 * generation the rule was computed in. */
enum { CFA_STOP = 0, CFA_RSP = 1, CFA_RBP = 2, CFA_DEREF_RBP = 3 };
#define NO_MODULE 0xffffu
#define RULE(off, kind, k, mod) \
	(((uint64_t)(off) & 0xffffff) | (uint64_t)(kind) << 24 | (uint64_t)(k) << 26 | (uint64_t)(mod) << 32)
#define RULE_OFF(r) ((int64_t)((r) << 40) >> 40)
#define RULE_KIND(r) (((r) >> 24) & 3)
#define RULE_RBPK(r) (((r) >> 26) & 63)
#define RULE_MOD(r) (((r) >> 32) & 0xffff)
#define RULE_GEN(r) ((r) >> 48)

#define CACHE_BITS 14
static struct {
	uint64_t key; /* pc ^ mix(val): a torn pair fails the check */
	uint64_t val;
} cache[1 << CACHE_BITS];

static inline uint64_t mix(uint64_t v) { return v * 0x9e3779b97f4a7c15ULL; }
static inline uint32_t cache_index(uintptr_t pc)
{
	return (uint32_t)((pc * 0x9e3779b97f4a7c15ULL) >> (64 - CACHE_BITS));
}

void mt_unwind_flush(void) { memset(cache, 0, sizeof cache); }

/* ---- DWARF call-frame information ---- */

static uint64_t uleb(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;
	unsigned shift = 0;
	while (*p < end) {
		uint8_t b = *(*p)++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	return v;
}

static int64_t sleb(const uint8_t **p, const uint8_t *end)
{
	int64_t v = 0;
	unsigned shift = 0;
	uint8_t b = 0;
	while (*p < end) {
		b = *(*p)++;
		if (shift < 64)
			v |= (int64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	if (shift < 64 && (b & 0x40))
		v |= -((int64_t)1 << shift);
	return v;
}

/* encoded reads a pointer in DW_EH_PE encoding enc. datarel is the base
 * for DW_EH_PE_datarel (the start of .eh_frame_hdr). */
static int encoded(const uint8_t **p, const uint8_t *end, uint8_t enc, uintptr_t datarel, uint64_t *out)
{
	if (enc == 0xff)
		return 0;
	const uint8_t *start = *p;
	uint64_t v;
	switch (enc & 0x0f) {
	case 0x00: memcpy(&v, *p, 8); *p += 8; break;
	case 0x01: v = uleb(p, end); break;
	case 0x02: { uint16_t x; memcpy(&x, *p, 2); v = x; *p += 2; break; }
	case 0x03: { uint32_t x; memcpy(&x, *p, 4); v = x; *p += 4; break; }
	case 0x04: memcpy(&v, *p, 8); *p += 8; break;
	case 0x09: v = (uint64_t)sleb(p, end); break;
	case 0x0a: { int16_t x; memcpy(&x, *p, 2); v = (uint64_t)(int64_t)x; *p += 2; break; }
	case 0x0b: { int32_t x; memcpy(&x, *p, 4); v = (uint64_t)(int64_t)x; *p += 4; break; }
	case 0x0c: memcpy(&v, *p, 8); *p += 8; break;
	default: return 0;
	}
	switch (enc & 0x70) {
	case 0x00: break;
	case 0x10: v += (uintptr_t)start; break;
	case 0x30: v += datarel; break;
	default: return 0;
	}
	if (enc & 0x80)
		return 0; /* indirect: not used for code addresses */
	*out = v;
	return 1;
}

struct reg_rule {
	uint8_t how; /* 0 same value, 1 saved at CFA+off, 2 undefined, 3 unsupported */
	int64_t off;
};

struct cfa_state {
	uint8_t cfa_reg;
	uint8_t cfa_deref; /* CFA = *(rbp + cfa_off) */
	uint8_t bad;
	int64_t cfa_off;
	struct reg_rule rbp, ra;
};

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	uint8_t fde_enc;
	uint8_t has_z;
	const uint8_t *insns, *end;
};

static int parse_cie(const uint8_t *p, struct cie *c)
{
	uint64_t len;
	uint32_t l32;
	memcpy(&l32, p, 4);
	p += 4;
	len = l32;
	if (l32 == 0xffffffff) {
		memcpy(&len, p, 8);
		p += 8;
	}
	const uint8_t *end = p + len;
	p += l32 == 0xffffffff ? 8 : 4; /* CIE id */
	uint8_t version = *p++;
	const char *aug = (const char *)p;
	while (p < end && *p)
		p++;
	p++;
	if (aug[0] == 'e' && aug[1] == 'h')
		p += 8;
	if (version >= 4)
		p += 2; /* address and segment selector sizes */
	c->code_align = uleb(&p, end);
	c->data_align = sleb(&p, end);
	c->ra_reg = version == 1 ? *p++ : uleb(&p, end);
	c->fde_enc = 0;
	c->has_z = 0;
	const uint8_t *aug_end = NULL;
	for (const char *a = aug; *a; a++) {
		switch (*a) {
		case 'z': {
			uint64_t n = uleb(&p, end);
			c->has_z = 1;
			aug_end = p + n;
			break;
		}
		case 'R': c->fde_enc = *p++; break;
		case 'L': p++; break;
		case 'P': {
			uint8_t enc = *p++;
			uint64_t ignored;
			if (!encoded(&p, end, enc & 0x7f, 0, &ignored))
				return 0;
			break;
		}
		case 'S': case 'B': case 'e': case 'h': break;
		default:
			if (aug_end == NULL)
				return 0;
			p = aug_end;
			goto done;
		}
	}
done:
	if (aug_end != NULL)
		p = aug_end;
	c->insns = p;
	c->end = end;
	return p <= end;
}

static void set_reg(struct cfa_state *s, uint64_t reg, uint8_t how, int64_t off)
{
	if (reg == 6) {
		s->rbp.how = how;
		s->rbp.off = off;
	} else if (reg == 16) {
		s->ra.how = how;
		s->ra.off = off;
	}
}

/* run executes CFA instructions until the location passes target. */
static void run(struct cfa_state *s, const struct cfa_state *initial, const struct cie *c, const uint8_t *p,
		const uint8_t *end, uint64_t loc, uint64_t target)
{
	struct cfa_state stack[8];
	int depth = 0;
	while (p < end && !s->bad) {
		uint8_t op = *p++;
		uint64_t reg, delta;
		switch (op >> 6) {
		case 1:
			loc += (op & 0x3f) * c->code_align;
			if (loc > target)
				return;
			continue;
		case 2:
			set_reg(s, op & 0x3f, 1, (int64_t)uleb(&p, end) * c->data_align);
			continue;
		case 3:
			reg = op & 0x3f;
			if (reg == 6)
				s->rbp = initial->rbp;
			else if (reg == 16)
				s->ra = initial->ra;
			continue;
		}
		switch (op) {
		case 0x00: break;
		case 0x01: {
			uint64_t v;
			if (!encoded(&p, end, c->fde_enc, 0, &v)) {
				s->bad = 1;
				return;
			}
			loc = v;
			if (loc > target)
				return;
			break;
		}
		case 0x02: delta = *p++; goto advance;
		case 0x03: { uint16_t x; memcpy(&x, p, 2); p += 2; delta = x; goto advance; }
		case 0x04: { uint32_t x; memcpy(&x, p, 4); p += 4; delta = x; goto advance; }
		advance:
			loc += delta * c->code_align;
			if (loc > target)
				return;
			break;
		case 0x05: reg = uleb(&p, end); set_reg(s, reg, 1, (int64_t)uleb(&p, end) * c->data_align); break;
		case 0x06:
			reg = uleb(&p, end);
			if (reg == 6)
				s->rbp = initial->rbp;
			else if (reg == 16)
				s->ra = initial->ra;
			break;
		case 0x07: set_reg(s, uleb(&p, end), 2, 0); break;
		case 0x08: set_reg(s, uleb(&p, end), 0, 0); break;
		case 0x09: reg = uleb(&p, end); uleb(&p, end); set_reg(s, reg, 3, 0); break;
		case 0x0a:
			if (depth < 8)
				stack[depth++] = *s;
			else
				s->bad = 1;
			break;
		case 0x0b:
			if (depth > 0) {
				*s = stack[--depth];
			} else {
				s->bad = 1;
			}
			break;
		case 0x0c: s->cfa_reg = (uint8_t)uleb(&p, end); s->cfa_off = (int64_t)uleb(&p, end); s->cfa_deref = 0; break;
		case 0x0d: s->cfa_reg = (uint8_t)uleb(&p, end); s->cfa_deref = 0; break;
		case 0x0e: s->cfa_off = (int64_t)uleb(&p, end); break;
		case 0x0f: {
			/* Only the stack-realignment form gcc emits for main:
			 * DW_OP_breg6 (rbp) N; DW_OP_deref. */
			uint64_t n = uleb(&p, end);
			const uint8_t *e = p + n;
			if (n >= 3 && p[0] == 0x76) {
				const uint8_t *q = p + 1;
				int64_t off = sleb(&q, e);
				if (q + 1 == e && *q == 0x06) {
					s->cfa_reg = 6;
					s->cfa_off = off;
					s->cfa_deref = 1;
					p = e;
					break;
				}
			}
			s->bad = 1;
			p = e;
			break;
		}
		case 0x10: case 0x16: {
			reg = uleb(&p, end);
			uint64_t n = uleb(&p, end);
			p += n;
			set_reg(s, reg, 3, 0);
			break;
		}
		case 0x11: reg = uleb(&p, end); set_reg(s, reg, 1, sleb(&p, end) * c->data_align); break;
		case 0x12: s->cfa_reg = (uint8_t)uleb(&p, end); s->cfa_off = sleb(&p, end) * c->data_align; s->cfa_deref = 0; break;
		case 0x13: s->cfa_off = sleb(&p, end) * c->data_align; break;
		case 0x14: case 0x15: reg = uleb(&p, end); (void)uleb(&p, end); set_reg(s, reg, 3, 0); break;
		case 0x2e: uleb(&p, end); break;
		case 0x2f: reg = uleb(&p, end); set_reg(s, reg, 1, -(int64_t)uleb(&p, end) * c->data_align); break;
		default: s->bad = 1; return;
		}
	}
}

/* fde_for finds the FDE covering target through the .eh_frame_hdr table. */
static const uint8_t *fde_for(const uint8_t *hdr, uintptr_t target)
{
	if (hdr[0] != 1 || hdr[3] != 0x3b)
		return NULL;
	const uint8_t *p = hdr + 4, *end = hdr + 64;
	uint64_t eh_frame, count;
	if (!encoded(&p, end, hdr[1], (uintptr_t)hdr, &eh_frame) || !encoded(&p, end, hdr[2], (uintptr_t)hdr, &count))
		return NULL;
	const int32_t *table = (const int32_t *)p;
	int64_t rel = (int64_t)(target - (uintptr_t)hdr);
	size_t lo = 0, hi = count;
	if (count == 0 || rel < table[0])
		return NULL;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (table[2 * mid] <= rel)
			lo = mid;
		else
			hi = mid;
	}
	return hdr + table[2 * lo + 1];
}

/* compute_rule interprets the CFA program for pc, a return address. */
static uint64_t compute_rule(const struct mt_module *m, uint32_t slot, uintptr_t pc)
{
	uintptr_t target = pc - 1; /* inside the call instruction */
	const uint8_t *fde = m->eh_frame_hdr ? fde_for(m->eh_frame_hdr, target) : NULL;
	if (fde == NULL)
		goto frame_pointer;
	uint32_t l32;
	memcpy(&l32, fde, 4);
	if (l32 == 0 || l32 == 0xffffffff)
		goto frame_pointer;
	const uint8_t *p = fde + 4, *end = p + l32;
	uint32_t cie_off;
	memcpy(&cie_off, p, 4);
	struct cie c;
	if (!parse_cie(p - cie_off, &c))
		return RULE(0, CFA_STOP, 0, slot);
	p += 4;
	uint64_t begin, range;
	if (!encoded(&p, end, c.fde_enc, 0, &begin) || !encoded(&p, end, c.fde_enc & 0x0f, 0, &range))
		return RULE(0, CFA_STOP, 0, slot);
	if (target < begin || target >= begin + range)
		goto frame_pointer;
	if (c.has_z) {
		uint64_t n = uleb(&p, end);
		p += n;
	}
	struct cfa_state initial = {.cfa_reg = 7, .cfa_off = 8, .ra = {1, -8}};
	run(&initial, &initial, &c, c.insns, c.end, 0, UINT64_MAX);
	struct cfa_state s = initial;
	run(&s, &initial, &c, p, end, begin, target);
	if (s.bad || c.ra_reg != 16 || s.ra.how != 1 || s.ra.off != -8)
		return RULE(0, CFA_STOP, 0, slot);
	uint64_t kind;
	if (s.cfa_deref)
		kind = CFA_DEREF_RBP;
	else if (s.cfa_reg == 7)
		kind = CFA_RSP;
	else if (s.cfa_reg == 6)
		kind = CFA_RBP;
	else
		return RULE(0, CFA_STOP, 0, slot);
	if (s.cfa_off < -(1 << 23) || s.cfa_off >= (1 << 23))
		return RULE(0, CFA_STOP, 0, slot);
	uint64_t k = 0;
	if (s.rbp.how == 1) {
		if (s.rbp.off >= 0 || s.rbp.off % 8 != 0 || -s.rbp.off / 8 > 63)
			return RULE(0, CFA_STOP, 0, slot);
		k = (uint64_t)(-s.rbp.off / 8);
	} else if (s.rbp.how != 0) {
		return RULE(0, CFA_STOP, 0, slot);
	}
	return RULE(s.cfa_off, kind, k, slot);

frame_pointer:
	/* No call-frame information: assume the standard frame-pointer
	 * prologue; the bounds checks catch code that has none. */
	return RULE(16, CFA_RBP, 2, slot);
}

/* rule_miss finds the module of pc (refreshing the table if needed) and
 * computes its rule. */
static uint64_t rule_miss(struct mt_thread *t, uintptr_t pc)
{
	for (int attempt = 0;; attempt++) {
		mt_modules_lock();
		uint64_t gen = mt_modgen & 0xffff;
		int slot = mt_module_find(pc);
		uint64_t r;
		if (slot >= 0)
			r = compute_rule(mt_module_at((uint32_t)slot), (uint32_t)slot, pc);
		else
			r = RULE(0, CFA_STOP, 0, NO_MODULE);
		mt_modules_unlock();
		if (slot >= 0 || attempt > 0)
			return r | gen << 48;
		mt_modules_refresh(t);
	}
}

static inline uint64_t rule_for(struct mt_thread *t, uintptr_t pc)
{
	uint32_t i = cache_index(pc);
	uint64_t k = __atomic_load_n(&cache[i].key, __ATOMIC_RELAXED);
	uint64_t v = __atomic_load_n(&cache[i].val, __ATOMIC_RELAXED);
	uint64_t gen = __atomic_load_n(&mt_modgen, __ATOMIC_RELAXED) & 0xffff;
	if (MT_LIKELY((k ^ mix(v)) == pc && RULE_GEN(v) == gen))
		return v;
	v = rule_miss(t, pc);
	__atomic_store_n(&cache[i].val, v, __ATOMIC_RELAXED);
	__atomic_store_n(&cache[i].key, pc ^ mix(v), __ATOMIC_RELAXED);
	return v;
}

/* uses_bp reports whether the rule r computes the CFA from rbp. */
static inline int uses_bp(uint64_t r) { return RULE_KIND(r) == CFA_RBP || RULE_KIND(r) == CFA_DEREF_RBP; }

/* step moves pc, sp and bp one frame outwards by r, the rule of pc, and
 * sets *cfa_at to where it loaded the CFA from (0: computed). It returns 0
 * where the stack ends or cannot be followed. */
static inline int step(uint64_t r, uintptr_t *pc, uintptr_t *sp, uintptr_t *bp, uintptr_t *cfa_at, uintptr_t lo,
		       uintptr_t hi)
{
	uintptr_t cfa;
	*cfa_at = 0;
	switch (RULE_KIND(r)) {
	case CFA_RSP: cfa = *sp + RULE_OFF(r); break;
	case CFA_RBP: cfa = *bp + RULE_OFF(r); break;
	case CFA_DEREF_RBP: {
		uintptr_t at = *bp + RULE_OFF(r);
		if (at < lo || at + 8 > hi || (at & 7))
			return 0;
		cfa = *(const uintptr_t *)at;
		*cfa_at = at;
		break;
	}
	default: return 0;
	}
	if (cfa <= *sp || cfa > hi || (cfa & 7))
		return 0;
	uint64_t rbpk = RULE_RBPK(r);
	if (rbpk) {
		if (cfa - 8 * rbpk < *sp)
			return 0;
		*bp = *(const uintptr_t *)(cfa - 8 * rbpk);
	}
	*pc = *(const uintptr_t *)(cfa - 8);
	*sp = cfa;
	return 1;
}

void mt_list(struct mt_thread *t, const struct mt_frame *to)
{
	struct mt_frame *f = (struct mt_frame *)t->listed;
	struct mt_check *c = t->check_end;
	for (; f < to; f++) {
		if (c + 3 > t->check + MT_CHECK_WORDS)
			break;
		f->check = (uint32_t)(c - t->check);
		c->at = (const uintptr_t *)(f->sp - 8), c->v = f->ra, c++;
		if (f->bp_used && f->bp_slot)
			c->at = (const uintptr_t *)(f->sp - 8 * f->bp_slot), c->v = f->bp, c++;
		if (f->cfa_at)
			c->at = (const uintptr_t *)f->cfa_at, c->v = f->sp, c++;
	}
	t->listed = f;
	t->check_end = c;
}

/* unlist says that the words the frames from i inwards read changed. */
static inline void unlist(struct mt_thread *t, uint32_t i)
{
	if (t->listed > &t->frame[i]) {
		t->listed = &t->frame[i];
		t->check_end = t->check + t->frame[i].check;
	}
}

/*
 * capture_sibling is mt_capture_walk for a caller in the frame of the
 * previous stack's innermost one (the same stack pointer) at another
 * call site, or with another rbp, as a loop that frees and allocates
 * from two lines gives: the walk would unwind that one frame, find the
 * next one outwards matching, and reuse the stack from there. That is
 * done here without the walk's setup, with the same result. It returns 0
 * where it does not apply, having changed nothing; the walk then runs.
 */
static int capture_sibling(struct mt_thread *t, uintptr_t pc, uintptr_t sp, uintptr_t bp)
{
	struct mt_frame *top = t->top != NULL ? &t->frame[t->depth - 1] : NULL;
	/* The frame outside it must be reused with its node (step 3): a
	 * cut stack keeps at least two frames for that. */
	if (top == NULL || t->modgen != mt_modgen || top->sp != sp || t->depth < 2 ||
	    (mt_stack_cut(t) && mt_proc.max_frames < 2))
		return 0;
	uint64_t r = rule_for(t, pc);
	if (RULE_MOD(r) == NO_MODULE)
		return 0;
	uintptr_t outer_pc = pc, outer_sp = sp, outer_bp = bp, cfa_at;
	if (!step(r, &outer_pc, &outer_sp, &outer_bp, &cfa_at, sp, t->stack_hi ? t->stack_hi : sp + (8u << 20)))
		return 0;
	struct mt_frame *outer = top - 1;
	if (outer->sp != outer_sp || outer->ra != outer_pc || (outer->bp_used && outer->bp != outer_bp) ||
	    !mt_outer_unchanged(t, outer))
		return 0;
	/* The words outer read changed only if these did: a loop's two
	 * call sites seldom make them. */
	if (outer->cfa_at != cfa_at || outer->bp_slot != (uint8_t)RULE_RBPK(r))
		unlist(t, t->depth - 2);
	outer->cfa_at = cfa_at;
	outer->bp_slot = (uint8_t)RULE_RBPK(r);
	top->ra = pc;
	top->bp = bp;
	top->mod = (uint32_t)RULE_MOD(r);
	top->bp_used = uses_bp(r) || (!RULE_RBPK(r) && outer->bp_used);
	const struct mt_module *mod = mt_module_at(top->mod);
	top->node = mt_intern(t, outer->node, mod->id, pc - mod->base);
	t->stack_id = top->node;
	return 1;
}

/*
 * mt_capture_walk sets t->stack_id to the stack of the allocator call whose
 * caller returns to pc with stack pointer sp and rbp bp.
 *
 *  1. Unwind from the caller outwards, frame by frame, until a frame matches
 *     the previous stack at the same stack address and its outer frames
 *     are unchanged, or the stack ends. Past max_frames the walk goes on
 *     to count the frames the trace leaves out, up to MT_MAX_FRAMES_LIMIT
 *     of them; a stack deeper than that is uncounted.
 *  2. The stack is the new frames on top of the previous stack's frames
 *     from the matched one outwards, all of them kept, beyond the cut
 *     too: so the number of frames is exact, and so is the number the
 *     trace leaves out. (An uncounted stack is not reused: its outermost
 *     frames were never seen.)
 *  3. The innermost max_frames frames are recorded; if there are more,
 *     the root is a node of module MT_MODULE_CUT whose offset is their
 *     number (0: uncounted), so that a cut stack says so. The previous
 *     stack's nodes name the kept frames only if they hang from the same
 *     root (both uncut, or both cut by as many frames); otherwise the
 *     recorded ones among them are interned again below the new root.
 *  4. Intern the new frames, outermost first, on top of that, and write
 *     them over the previous stack's inner frames: it is kept outermost
 *     first so that the reused part never moves.
 */
static void mt_capture_walk(struct mt_thread *t, uintptr_t pc, uintptr_t sp, uintptr_t bp)
{
	if (capture_sibling(t, pc, sp, bp))
		return;
	int max = (int)mt_proc.max_frames, n = 0;
	int walk_limit = max + MT_MAX_FRAMES_LIMIT;
	if (t->modgen != mt_modgen || t->uncounted || mt_proc.hdr->full_unwind) {
		t->depth = 0;
		t->modgen = mt_modgen;
	}
	int m = (int)t->depth - 1; /* the previous stack's frame to compare with */
	int reuse = 0;
	int uncounted = 0; /* the stack goes on beyond walk_limit frames */
	uintptr_t lo = sp, hi = t->stack_hi ? t->stack_hi : sp + (8u << 20);
	/* How the innermost frame got its rbp and CFA: from registers. */
	t->new_frame[0].cfa_at = 0;
	t->new_frame[0].bp_slot = 0;
	while (pc != 0) {
		while (m >= 0 && t->frame[m].sp < sp)
			m--;
		if (m >= 0 && t->frame[m].sp == sp && t->frame[m].ra == pc && (!t->frame[m].bp_used || t->frame[m].bp == bp) &&
		    n + m + 1 <= walk_limit && mt_outer_unchanged(t, &t->frame[m])) {
			reuse = 1;
			break;
		}
		uint64_t r = rule_for(t, pc);
		if (RULE_MOD(r) == NO_MODULE)
			break;
		if (n == walk_limit) {
			uncounted = 1;
			break;
		}
		struct mt_new_frame *f = &t->new_frame[n];
		f->ra = pc;
		f->sp = sp;
		f->bp = bp;
		f->rule = r;
		f->mod = (uint32_t)RULE_MOD(r);
		n++;
		f[1].bp_slot = (uint8_t)RULE_RBPK(r);
		if (!step(r, &pc, &sp, &bp, &f[1].cfa_at, lo, hi))
			break;
	}
	/* Step 2: the frames kept, and how many of them are recorded. */
	int base = reuse ? m + 1 : 0, depth = base + n;
	int cut = depth > max;
	int first = cut ? depth - max : 0; /* the outermost recorded frame */
	/* Step 3: the root, and the frames whose nodes still hold. */
	uint32_t parent = 0;
	int from = first; /* the outermost frame to intern */
	if (reuse && m >= first && (cut ? mt_stack_cut(t) && (int)t->depth == depth : !mt_stack_cut(t))) {
		parent = t->frame[m].node;
		from = m + 1;
	} else if (cut) {
		parent = mt_intern(t, 0, MT_MODULE_CUT, uncounted ? 0 : (uint64_t)(depth - max));
	}
	if (reuse) {
		/* The matched frame now hangs below the new frames. */
		t->frame[m].cfa_at = t->new_frame[n].cfa_at;
		t->frame[m].bp_slot = t->new_frame[n].bp_slot;
	}
	/* Step 4. */
	for (int i = n - 1, at = base; i >= 0; i--, at++) {
		const struct mt_new_frame *nf = &t->new_frame[i];
		struct mt_frame *f = &t->frame[at];
		uint64_t r = nf->rule;
		f->ra = nf->ra;
		f->sp = nf->sp;
		f->mod = nf->mod;
		f->bp = nf->bp;
		f->cfa_at = nf->cfa_at;
		f->bp_slot = nf->bp_slot;
		/* Its rbp matters if its rule uses it, or passes it on
		 * unchanged to an outer frame that needs it. */
		f->bp_used = uses_bp(r) || (!RULE_RBPK(r) && at > 0 && f[-1].bp_used);
	}
	for (int at = from; at < depth; at++) {
		const struct mt_module *mod = mt_module_at(t->frame[at].mod);
		parent = mt_intern(t, parent, mod->id, t->frame[at].ra - mod->base);
		t->frame[at].node = parent;
	}
	t->depth = (uint32_t)depth;
	t->uncounted = (uint32_t)uncounted;
	t->stack_id = parent;
	/* The frames written, and the matched one, whose cfa_at and bp_slot
	 * changed. */
	unlist(t, reuse ? (uint32_t)m : 0);
	/* What mt_capture_stack needs to reuse the whole stack from its
	 * innermost frame, as step 1 would at once: the frame's node set to
	 * the stack (so max_frames > 0), a counted stack, reuse allowed.
	 * The frame's cfa_at and bp_slot are 0 (its CFA and rbp come from
	 * registers), as such a reuse leaves them. */
	t->top = depth > 0 && !uncounted && max > 0 && !mt_proc.hdr->full_unwind ? &t->frame[depth - 1] : NULL;
	if (t->top != NULL)
		t->top_use = mt_stack_use(t, t->top->sp);
}

void mt_capture_slow(struct mt_thread *t, const uintptr_t *frame)
{
	uintptr_t pc = frame[1], sp = (uintptr_t)(frame + 2), bp = frame[0];
	t->stack_use = mt_stack_use(t, sp);
	/* A heap event publishes the thread's calls of a window that has
	 * ended, so that they come before it in the trace. */
	if (MT_UNLIKELY(t->calls_n != 0))
		mt_calls_due(t);
	/* The fast path's case, but for the words of the outer frames: they
	 * are listed here, where they will be checked again, rather than by
	 * a walk, which on a deep stack that changes at every event would
	 * list them all for one check. Up to MT_CHECK_WORDS: the frames
	 * beyond are checked one by one. */
	const struct mt_frame *f = t->top;
	if (f != NULL && t->modgen == mt_modgen && f->sp == sp && f->ra == pc && (!f->bp_used || f->bp == bp)) {
		if (t->listed != f)
			mt_list(t, f);
		if (mt_outer_unchanged(t, f)) {
			t->stack_id = f->node;
			return;
		}
	}
	mt_capture_walk(t, pc, sp, bp);
}
