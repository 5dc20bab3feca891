/*
 * stacks.c: the call-stack tree of a process.
 *
 * Stacks are interned as paths in a tree: a node is (parent node, module,
 * offset of a return address), and an event names its stack by the
 * innermost node. The nodes live in the shared region, so the recorder
 * reads them directly when an event refers to one it has not seen, and a
 * parent always has a smaller id than its children.
 *
 * The index that finds a node by its contents is private to the process.
 * Lookups take no lock; inserts take one, and when the index grows a new
 * one is built beside the old, which lookups still in flight keep using.
 */
#include <string.h>

#include "agent.h"

struct index {
	uint64_t mask;
	uint64_t used;
	uint32_t ids[];
};

static struct index *current;

static uint32_t intern_shared(uint32_t parent, uint32_t module, uint64_t offset);
static mt_lock_t insert_lock;

static inline uint64_t node_hash(uint32_t parent, uint32_t module, uint64_t offset)
{
	uint64_t h = offset * 0x9e3779b97f4a7c15ULL;
	h ^= ((uint64_t)parent << 20 | module) * 0xc2b2ae3d27d4eb4fULL;
	return h ^ (h >> 29);
}

static struct index *new_index(uint64_t capacity)
{
	struct index *ix = mt_map(sizeof *ix + capacity * sizeof(uint32_t));
	if (ix != NULL)
		ix->mask = capacity - 1;
	return ix;
}

static uint32_t find(const struct index *ix, uint32_t parent, uint32_t module, uint64_t offset)
{
	const struct mt_node *nodes = mt_proc.nodes;
	for (uint64_t i = node_hash(parent, module, offset) & ix->mask;; i = (i + 1) & ix->mask) {
		uint32_t id = __atomic_load_n(&ix->ids[i], __ATOMIC_ACQUIRE);
		if (id == 0)
			return 0;
		const struct mt_node *n = &nodes[id];
		if (n->parent == parent && n->module == module && n->offset == offset)
			return id;
	}
}

static void put(struct index *ix, uint32_t id)
{
	const struct mt_node *n = &mt_proc.nodes[id];
	uint64_t i = node_hash(n->parent, n->module, n->offset) & ix->mask;
	while (ix->ids[i] != 0)
		i = (i + 1) & ix->mask;
	__atomic_store_n(&ix->ids[i], id, __ATOMIC_RELEASE);
	ix->used++;
}

/* grow builds an index twice the size holding every node so far. */
static struct index *grow(struct index *old)
{
	struct index *ix = new_index((old->mask + 1) * 2);
	if (ix == NULL)
		return old;
	uint64_t count = mt_proc.hdr->node_count;
	for (uint64_t id = 1; id <= count; id++)
		put(ix, (uint32_t)id);
	return ix;
}

uint32_t mt_intern(struct mt_thread *t, uint32_t parent, uint32_t module, uint64_t offset)
{
	uint64_t h = node_hash(parent, module, offset);
	__typeof__(&t->recent[0]) r = &t->recent[(h >> 24) % (sizeof t->recent / sizeof t->recent[0])];
	if (MT_LIKELY(r->id != 0 && r->parent == parent && r->module == module && r->offset == offset))
		return r->id;
	uint32_t id = intern_shared(parent, module, offset);
	if (id != parent) {
		r->parent = parent;
		r->module = module;
		r->offset = offset;
		r->id = id;
	}
	return id;
}

/* intern_shared finds or adds a node in the process's table. */
static uint32_t intern_shared(uint32_t parent, uint32_t module, uint64_t offset)
{
	struct index *ix = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
	if (MT_LIKELY(ix != NULL)) {
		uint32_t id = find(ix, parent, module, offset);
		if (id != 0)
			return id;
	}
	mt_lock(&insert_lock);
	ix = current;
	if (ix == NULL) {
		/* Small: the index is hashed, so its pages are all touched
		 * soon, and programs have a few thousand nodes (jq 2,400,
		 * sqlite3 2,900; 64k entries cost them 256 KiB). */
		ix = new_index(1 << 13);
		if (ix == NULL) {
			mt_unlock(&insert_lock);
			return parent;
		}
		__atomic_store_n(&current, ix, __ATOMIC_RELEASE);
	}
	uint32_t id = find(ix, parent, module, offset);
	if (id == 0) {
		struct mt_header *hdr = mt_proc.hdr;
		uint64_t next = hdr->node_count + 1;
		if (next >= hdr->node_capacity) {
			/* The table is full: the stack keeps its outer part. */
			__atomic_fetch_add(&hdr->nodes_lost, 1, __ATOMIC_RELAXED);
			mt_unlock(&insert_lock);
			return parent;
		}
		if ((ix->used + 1) * 2 > ix->mask + 1) {
			ix = grow(ix);
			__atomic_store_n(&current, ix, __ATOMIC_RELEASE);
		}
		struct mt_node *n = &mt_proc.nodes[next];
		n->parent = parent;
		n->module = module;
		n->offset = offset;
		__atomic_store_n(&hdr->node_count, next, __ATOMIC_RELEASE);
		id = (uint32_t)next;
		put(ix, id);
	}
	mt_unlock(&insert_lock);
	return id;
}

/* mt_stacks_reset forgets the tree: a fork child starts its own. The old
 * index is left to the child's copy of the parent's memory. */
void mt_stacks_reset(void)
{
	insert_lock.v = 0;
	current = NULL;
}
