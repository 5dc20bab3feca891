/*
 * arena.c: the agent's own memory, taken from mmap so that the heap being
 * traced never sees it.
 */
#include <sys/mman.h>

#include "agent.h"

#define ARENA_CHUNK (1 << 20)

static mt_lock_t arena_lock;
static uint8_t *arena_cur, *arena_end;

/* The agent's mappings, the first MT_MAX_MAPS of them: the leak scan
 * leaves them out of its roots (they hold no pointer of the program's,
 * and the call-stack index alone is megabytes that would take the scan
 * tens of milliseconds to read). The kernel may merge one with a mapping
 * of the program's, so the recorder takes them out by address. */
struct mt_mapping mt_maps[MT_MAX_MAPS];
uint32_t mt_nmaps;

void *mt_map(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	uint32_t i = __atomic_fetch_add(&mt_nmaps, 1, __ATOMIC_RELAXED);
	if (i < MT_MAX_MAPS) {
		mt_maps[i].size = size;
		__atomic_store_n(&mt_maps[i].addr, (uintptr_t)p, __ATOMIC_RELEASE);
	}
	return p;
}

/* A thread's state comes from the arena's chunks, not a mapping of its
 * own: the leak scan leaves out only MT_MAX_MAPS of the agent's mappings,
 * and a program may have more threads. */
_Static_assert(sizeof(struct mt_thread) < ARENA_CHUNK / 4, "struct mt_thread must stay below ARENA_CHUNK / 4");

/* mt_arena_alloc hands out zeroed memory that is never given back. */
void *mt_arena_alloc(size_t size)
{
	size = (size + 63) & ~(size_t)63;
	if (size >= ARENA_CHUNK / 4)
		return mt_map(size);
	mt_lock(&arena_lock);
	if (arena_cur == NULL || (size_t)(arena_end - arena_cur) < size) {
		uint8_t *chunk = mt_map(ARENA_CHUNK);
		if (chunk == NULL) {
			mt_unlock(&arena_lock);
			return NULL;
		}
		arena_cur = chunk;
		arena_end = chunk + ARENA_CHUNK;
	}
	void *p = arena_cur;
	arena_cur += size;
	mt_unlock(&arena_lock);
	return p;
}
