/*
 * modules.c: the objects loaded in the process.
 *
 * The table is refreshed with dl_iterate_phdr when the unwinder meets an
 * address outside every known module and after dlclose. Each object gets an
 * id that is never reused, so a library unloaded and another loaded at the
 * same address keep apart; the recorder learns of each through MODULE and
 * UNLOAD records, in order with the events.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

#define MAX_MODULES 65535

struct mt_module *mt_modules;
static uint32_t nmodules;
static uint32_t next_id = 1;
static mt_lock_t modules_lock;
uint32_t mt_modgen = 1;

uint32_t mt_modules_count(void) { return __atomic_load_n(&nmodules, __ATOMIC_ACQUIRE); }

static void bump_generation(void)
{
	uint32_t g = mt_modgen + 1;
	if ((g & 0xffff) == 0)
		g++;
	__atomic_store_n(&mt_modgen, g, __ATOMIC_RELEASE);
	if ((g & 0xffff) == 1)
		mt_unwind_flush();
}

void mt_modules_after_fork(void)
{
	modules_lock.v = 0;
	nmodules = 0;
	next_id = 1;
	bump_generation();
}

static void read_build_id(struct mt_module *m, const struct dl_phdr_info *info)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		const uint8_t *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
			const uint8_t *name = p + sizeof *n;
			const uint8_t *desc = name + ((n->n_namesz + 3) & ~3u);
			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
			    n->n_descsz <= sizeof m->build_id && desc + n->n_descsz <= end) {
				memcpy(m->build_id, desc, n->n_descsz);
				m->build_id_len = n->n_descsz;
				return;
			}
			p = desc + ((n->n_descsz + 3) & ~3u);
		}
	}
}

/* copy_path runs under modules_lock. Its buffer is not on the stack,
 * where it would count as the program's use of it (stackuse.c). */
static const char *copy_path(const char *name, uint32_t *len)
{
	static char buf[4096];
	if (name == NULL || name[0] == 0) {
		ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
		if (n < 0)
			n = 0;
		buf[n] = 0;
		name = buf;
	}
	size_t n = strlen(name);
	char *p = mt_arena_alloc(n + 1);
	if (p == NULL) {
		*len = 0;
		return "";
	}
	memcpy(p, name, n + 1);
	*len = (uint32_t)n;
	return p;
}

static int is_vdso(const char *name)
{
	return name != NULL && (strncmp(name, "linux-vdso", 10) == 0 || strncmp(name, "linux-gate", 10) == 0);
}

static uintptr_t first_load_vaddr(const struct dl_phdr_info *info)
{
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD)
			return info->dlpi_phdr[i].p_vaddr;
	return 0;
}

struct scan {
	uint32_t first_new;
	int first_object;
};

static int scan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct scan *s = arg;
	(void)size;
	int first = s->first_object;
	s->first_object = 0;
	if (is_vdso(info->dlpi_name))
		return 0;
	/* The main program is the first object and has an empty name. */
	const char *name = info->dlpi_name;
	if (!first && (name == NULL || name[0] == 0))
		return 0;
	uintptr_t first_vaddr = first_load_vaddr(info);
	for (uint32_t i = 0; i < nmodules; i++) {
		struct mt_module *m = &mt_modules[i];
		if (m->alive && m->base == info->dlpi_addr && m->segs[0].vaddr == first_vaddr &&
		    m->is_main == first && (first || strcmp(m->path, name) == 0)) {
			m->alive = 2; /* seen */
			return 0;
		}
	}
	if (nmodules >= MAX_MODULES)
		return 0;
	struct mt_module *m = &mt_modules[nmodules];
	memset(m, 0, sizeof *m);
	m->base = info->dlpi_addr;
	m->lo = UINTPTR_MAX;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_GNU_EH_FRAME)
			m->eh_frame_hdr = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		if (ph->p_type != PT_LOAD)
			continue;
		if (m->nsegs < 8) {
			m->segs[m->nsegs].vaddr = ph->p_vaddr;
			m->segs[m->nsegs].memsz = ph->p_memsz;
			m->segs[m->nsegs].offset = ph->p_offset;
			m->segs[m->nsegs].flags = ph->p_flags;
			m->nsegs++;
		}
		if (ph->p_flags & PF_X) {
			uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
			if (lo < m->lo)
				m->lo = lo;
			if (hi > m->hi)
				m->hi = hi;
		}
	}
	if (m->nsegs == 0 || m->hi == 0)
		return 0; /* nothing executable: no frames can be in it */
	read_build_id(m, info);
	m->path = copy_path(name, &m->path_len);
	m->id = next_id++;
	m->is_main = first;
	m->alive = 2;
	__atomic_store_n(&nmodules, nmodules + 1, __ATOMIC_RELEASE);
	return 0;
}

static void emit_module(struct mt_thread *t, const struct mt_module *m)
{
	uint64_t rec[255]; /* the longest record */
	unsigned n = 0;
	rec[n++] = 0;
	rec[n++] = mt_seq();
	rec[n++] = mt_tsc();
	rec[n++] = m->id;
	rec[n++] = m->base;
	rec[n++] = m->nsegs;
	for (uint32_t i = 0; i < m->nsegs; i++) {
		rec[n++] = m->segs[i].vaddr;
		rec[n++] = m->segs[i].memsz;
		rec[n++] = m->segs[i].offset;
		rec[n++] = m->segs[i].flags;
	}
	rec[n++] = m->build_id_len;
	memset(&rec[n], 0, 32);
	memcpy(&rec[n], m->build_id, m->build_id_len);
	n += (m->build_id_len + 7) / 8;
	/* A record's length is 8 bits of its first word: a path too long
	 * for the words left is not sent, rather than cut (a cut path could
	 * name another file) or overflowing the length into the kind. The
	 * recorder then finds the module's file in the process's maps. */
	uint32_t plen = m->path_len;
	if ((plen + 7) / 8 > 255 - (n + 1))
		plen = 0;
	rec[n++] = plen;
	memset(&rec[n], 0, (plen + 7) / 8 * 8);
	memcpy(&rec[n], m->path, plen);
	n += (plen + 7) / 8;
	rec[0] = MT_REC_MODULE | (uint64_t)n << 8;
	mt_emit(t, rec, n);
}

/* mt_modules_refresh brings the table up to date and tells the recorder
 * what changed. t is the thread whose ring carries the records. */
void mt_modules_refresh(struct mt_thread *t)
{
	mt_lock(&modules_lock);
	if (mt_modules == NULL) {
		mt_modules = mt_map(sizeof(struct mt_module) * MAX_MODULES);
		if (mt_modules == NULL) {
			mt_unlock(&modules_lock);
			return;
		}
	}
	for (uint32_t i = 0; i < nmodules; i++)
		if (mt_modules[i].alive)
			mt_modules[i].alive = 1;
	struct scan s = {.first_new = nmodules, .first_object = 1};
	dl_iterate_phdr(scan_one, &s);
	int changed = nmodules != s.first_new;
	for (uint32_t i = 0; i < s.first_new; i++) {
		struct mt_module *m = &mt_modules[i];
		if (m->alive == 1) {
			m->alive = 0;
			changed = 1;
			uint64_t rec[4] = {MT_REC_UNLOAD | 4 << 8, mt_seq(), mt_tsc(), m->id};
			mt_emit(t, rec, 4);
		}
	}
	for (uint32_t i = s.first_new; i < nmodules; i++)
		emit_module(t, &mt_modules[i]);
	if (changed)
		bump_generation();
	mt_unlock(&modules_lock);
}

/* mt_module_find returns the slot of the live module whose code holds pc,
 * or -1. */
int mt_module_find(uintptr_t pc)
{
	uint32_t n = mt_modules_count();
	for (uint32_t i = 0; i < n; i++) {
		const struct mt_module *m = &mt_modules[i];
		if (m->alive && pc >= m->lo && pc < m->hi)
			return (int)i;
	}
	return -1;
}

void mt_modules_lock(void) { mt_lock(&modules_lock); }
void mt_modules_unlock(void) { mt_unlock(&modules_lock); }
