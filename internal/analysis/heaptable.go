package analysis

// heapTable holds the blocks of a process by address: those live now, and
// those freed lately, so that one lookup tells the free of a live block
// from a double free and from the free of an address never allocated, and
// shows where a block freed twice was freed first. It remembers the
// latest maxFreed frees: like valgrind, whose queue of freed blocks is
// bounded too, it takes a free long after the first for an invalid free.
// An address allocated again forgets its free.
//
// Live and freed blocks share one table rather than two maps because
// looking an address up is most of the replay's work: an allocation then
// costs one lookup, and a free one and the dropping of the oldest free.
type heapTable struct {
	blocks addrMap[block]
	// ring holds the addresses of the latest frees in the order they
	// happened, and freeStacks the stacks of those frees; next is the
	// oldest slot once the ring is full.
	ring       []uint64
	freeStacks []uint64
	next       int
}

// maxFreed bounds how many freed blocks a process remembers.
const maxFreed = 1 << 16

// freedBlock is what a heapTable remembers of a freed block.
type freedBlock struct {
	block
	freeStack uint64
}

// put makes b the live block at addr, and returns the block that was live
// there, if one was (its free was lost).
func (t *heapTable) put(addr uint64, b block) (old block, replaced bool) {
	e, existed := t.blocks.entry(addr)
	old, replaced = *e, existed && !e.freed
	*e = b
	return old, replaced
}

// free marks the block at addr freed, by a call from freeStack. If it was
// live, it returns it; else it returns what it knows of the address: a
// block freed before (wasFreed), or nothing.
func (t *heapTable) free(addr, freeStack uint64) (b block, live bool, earlier freedBlock, wasFreed bool) {
	p := t.blocks.find(addr)
	switch {
	case p == nil:
		return block{}, false, freedBlock{}, false
	case p.freed:
		return block{}, false, freedBlock{block: *p, freeStack: t.freeStacks[p.ringSlot()]}, true
	}
	b = *p
	slot := t.remember(addr, freeStack)
	// remember may have dropped the oldest free, moving entries: look
	// addr up again.
	p = t.blocks.find(addr)
	p.freed = true
	p.setRingSlot(slot)
	return b, true, freedBlock{}, false
}

// remember puts a free of addr in the ring, dropping the oldest once the
// ring is full, and returns its slot.
func (t *heapTable) remember(addr, freeStack uint64) int {
	if len(t.ring) < maxFreed {
		t.ring = append(t.ring, addr)
		t.freeStacks = append(t.freeStacks, freeStack)
		return len(t.ring) - 1
	}
	slot := t.next
	old := t.ring[slot]
	// The slot may be stale: its address allocated again since, or freed
	// again into another slot.
	if p := t.blocks.find(old); p != nil && p.freed && p.ringSlot() == slot {
		t.blocks.remove(old)
	}
	t.ring[slot], t.freeStacks[slot] = addr, freeStack
	t.next = (slot + 1) % maxFreed
	return slot
}

// each calls f for every live block, in no particular order.
func (t *heapTable) each(f func(addr uint64, b block)) {
	t.blocks.each(func(addr uint64, b block) {
		if !b.freed {
			f(addr, b)
		}
	})
}

// update calls f on every live block, which it may change.
func (t *heapTable) update(f func(*block)) {
	t.blocks.update(func(b *block) {
		if !b.freed {
			f(b)
		}
	})
}

// clone returns a copy of t.
func (t *heapTable) clone() heapTable {
	return heapTable{blocks: t.blocks.clone(), ring: append([]uint64(nil), t.ring...),
		freeStacks: append([]uint64(nil), t.freeStacks...), next: t.next}
}
