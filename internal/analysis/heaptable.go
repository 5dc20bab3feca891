package analysis

// heapTable holds the blocks of a process live now, by address, and
// remembers the latest maxFreed frees, so that the free of an address that
// is not live can be told a double free (and show where the block was
// freed first) or the free of an address never allocated. Like valgrind,
// whose queue of freed blocks is bounded too, it takes a free long after
// the first for an invalid free.
//
// Looking an address up is most of the replay's work, and the live blocks
// are few next to the frees remembered: so only the live blocks are in
// the hash table that every allocation and free looks in. The frees go,
// in order, into a ring that is only searched for a free that finds no
// live block (a double or invalid free: rare), and a Bloom filter of the
// ring's addresses spares most of those searches.
type heapTable struct {
	live addrMap[block]
	// ring holds the latest frees, the newest at ring[(next-1) % maxFreed]
	// once it is full; addrs their addresses, for the search.
	ring  []freedBlock
	addrs []uint64
	next  int
	seen  bloom // the addresses in ring
}

// maxFreed is how many frees are remembered.
const maxFreed = 1 << 16

// freedBlock is what a heapTable remembers of a freed block.
type freedBlock struct {
	block
	freeStack uint64
}

// put makes b the live block at addr, and returns the block that was live
// there, if one was (its free was lost).
func (t *heapTable) put(addr uint64, b block) (old block, replaced bool) {
	e, existed := t.live.entry(addr)
	old = *e
	*e = b
	return old, existed
}

// free ends the block live at addr, freed by a call from freeStack, and
// returns it. If none is live there, it returns what it remembers of the
// address: the latest free of it (wasFreed), or nothing.
func (t *heapTable) free(addr, freeStack uint64) (b block, live bool, earlier freedBlock, wasFreed bool) {
	p := t.live.find(addr)
	if p == nil {
		earlier, wasFreed = t.lookup(addr)
		return block{}, false, earlier, wasFreed
	}
	b = *p
	t.live.remove(addr)
	t.remember(addr, freedBlock{block: b, freeStack: freeStack})
	return b, true, freedBlock{}, false
}

// remember puts a free in the ring, over the oldest once it is full.
func (t *heapTable) remember(addr uint64, f freedBlock) {
	if len(t.ring) < maxFreed {
		t.ring = append(t.ring, f)
		t.addrs = append(t.addrs, addr)
	} else {
		t.ring[t.next], t.addrs[t.next] = f, addr
	}
	t.next = (t.next + 1) % maxFreed
	if t.next == 0 {
		// The ring went round: the filter forgets the addresses it
		// dropped, and learns the others again.
		t.seen.reset(t.addrs)
	} else {
		t.seen.add(addr)
	}
}

// lookup returns the latest free of addr the ring holds. The latest free
// of an address that is not live came after its latest allocation: a
// second free of it is a double free.
func (t *heapTable) lookup(addr uint64) (freedBlock, bool) {
	if !t.seen.mayHave(addr) {
		return freedBlock{}, false
	}
	n := len(t.addrs)
	for i := 1; i <= n; i++ {
		j := (t.next - i + n) % n
		if t.addrs[j] == addr {
			return t.ring[j], true
		}
	}
	return freedBlock{}, false
}

// each calls f for every live block, in no particular order.
func (t *heapTable) each(f func(addr uint64, b block)) { t.live.each(f) }

// update calls f on every live block, which it may change.
func (t *heapTable) update(f func(*block)) { t.live.update(f) }

// clone returns a copy of t.
func (t *heapTable) clone() heapTable {
	c := *t
	c.live = t.live.clone()
	c.ring = append([]freedBlock(nil), t.ring...)
	c.addrs = append([]uint64(nil), t.addrs...)
	c.seen = t.seen.clone()
	return c
}

// bloom is a Bloom filter of addresses, with two hashes into 2^21 bits:
// for the 65,536 addresses of the ring, one address in 270 not there
// seems to be.
type bloom struct{ bits []uint64 }

const bloomBits = 1 << 21

func bloomHashes(addr uint64) (uint64, uint64) {
	h := addr * 0x9e3779b97f4a7c15
	return h >> 43, (h >> 21) & (bloomBits - 1)
}

func (f *bloom) add(addr uint64) {
	if f.bits == nil {
		f.bits = make([]uint64, bloomBits/64)
	}
	a, b := bloomHashes(addr)
	f.bits[a/64] |= 1 << (a % 64)
	f.bits[b/64] |= 1 << (b % 64)
}

func (f *bloom) mayHave(addr uint64) bool {
	if f.bits == nil {
		return false
	}
	a, b := bloomHashes(addr)
	return f.bits[a/64]&(1<<(a%64)) != 0 && f.bits[b/64]&(1<<(b%64)) != 0
}

// reset makes the filter hold exactly addrs.
func (f *bloom) reset(addrs []uint64) {
	clear(f.bits)
	for _, a := range addrs {
		f.add(a)
	}
}

func (f *bloom) clone() bloom { return bloom{bits: append([]uint64(nil), f.bits...)} }
