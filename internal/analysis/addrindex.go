package analysis

import "math/bits"

// addrIndex maps the addresses of live blocks to their places in the heap
// table's arena. Every allocation looks its address up in it (a block
// there already was replaced: its free was lost), so it is compact — a
// key and a reference, 16 bytes — and uses open addressing with linear
// probing, at most half full.
//
// A free does not look its address up when the trace names its block by
// handle: the arena knows the block's slot here. Deleting (heapTable.
// unindex) shifts the entries after the hole back, so that no tombstones
// pile up, and tells the arena where they went.
type addrIndex struct {
	entries []indexEntry
	n       int // blocks indexed, the one at address 0 included
	mask    uint64
	shift   uint8 // 64 - log2(len(entries))
	// zero is the ref of the block at address 0, if hasZero: 0 marks
	// empty slots, and cannot be a key. Its slot is zeroSlot.
	zero    uint32
	hasZero bool
}

// zeroSlot is the slot of the block at address 0.
const zeroSlot = ^uint32(0)

type indexEntry struct {
	key uint64 // an address; 0: empty
	ref uint32 // where the block is in the arena
}

func (x *addrIndex) home(addr uint64) uint64 {
	// Fibonacci hashing, from the top bits of the product: its middle
	// bits put addresses a few cache lines apart, as the blocks of an
	// array of objects are, into long runs of slots.
	return (addr * 0x9e3779b97f4a7c15) >> x.shift
}

// find returns the ref of addr, if the index has it.
func (x *addrIndex) find(addr uint64) (uint32, bool) {
	if addr == 0 {
		return x.zero, x.hasZero
	}
	if x.n == 0 {
		return 0, false
	}
	for i := x.home(addr); ; i = (i + 1) & x.mask {
		switch x.entries[i].key {
		case addr:
			return x.entries[i].ref, true
		case 0:
			return 0, false
		}
	}
}

// full says that the index must grow before the next put.
func (x *addrIndex) full() bool { return (x.n+1)*2 > len(x.entries) }

// put makes ref the block of addr, and returns the slot of addr. If addr
// was in the index already, it returns the ref it had, with existed set.
// The index must not be full.
func (x *addrIndex) put(addr uint64, ref uint32) (slot, old uint32, existed bool) {
	if addr == 0 {
		old, existed = x.zero, x.hasZero
		x.zero, x.hasZero = ref, true
		if !existed {
			x.n++
		}
		return zeroSlot, old, existed
	}
	i := x.home(addr)
	for ; x.entries[i].key != 0; i = (i + 1) & x.mask {
		if x.entries[i].key == addr {
			old = x.entries[i].ref
			x.entries[i].ref = ref
			return uint32(i), old, true
		}
	}
	x.entries[i] = indexEntry{key: addr, ref: ref}
	x.n++
	return uint32(i), 0, false
}

// grow doubles the index (to 1,024 slots at first). The entries move:
// each is where each() says afterwards.
func (x *addrIndex) grow() {
	size := max(1024, 2*len(x.entries))
	old := x.entries
	x.entries, x.mask = make([]indexEntry, size), uint64(size-1)
	x.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	x.n = 0
	if x.hasZero {
		x.n = 1
	}
	for _, e := range old {
		if e.key != 0 {
			x.put(e.key, e.ref)
		}
	}
}

// each calls f with the slot and ref of every entry.
func (x *addrIndex) each(f func(slot, ref uint32)) {
	for i, e := range x.entries {
		if e.key != 0 {
			f(uint32(i), e.ref)
		}
	}
}

func (x *addrIndex) clone() addrIndex {
	c := *x
	c.entries = append([]indexEntry(nil), x.entries...)
	return c
}
