package trace

import "math/bits"

// addrTable says, for the Writer, where each address of a process is in
// the predictor state: which handle names it if it is live, and where it
// is in class lists. Every alloc and every free looks its address up, so
// it is on the hot path of recording: an open-addressing table with linear
// probing, kept at most a quarter full, does that in less than half the
// time a Go map takes (BenchmarkAddrTable), and an address that is
// released and allocated again keeps its slot.
type addrTable struct {
	slots []addrSlot // a power of two of them
	used  int
	shift uint   // 64 - log2(len(slots))
	gen   uint16 // the generation of the slots in use; the others are empty
}

// addrSlot is a slot of an addrTable. Emptying the table makes a new
// generation rather than clearing every slot: the table of a process that
// once had many live blocks stays big, and it is emptied with every block.
type addrSlot struct {
	addr uint64
	num  uint32 // the handle of the live block at addr; 0 if none
	gen  uint16
	// The latest pushes of addr onto class lists that are still in them,
	// the latest first; 0 for none. An address allocated again without
	// being taken out of its list stays in it, and is often found there
	// later: glibc hands a chunk out by its size again and again, while a
	// program asks for sizes of several classes that fit the chunk.
	lists [maxListings]listing
}

// maxListings is how many listings of an address the Writer remembers. On
// the malloc-dense loop, two find 85% of the addresses that all would,
// four 98%.
const maxListings = 4

// listing says where an address is in a class list: the class (never 0)
// in the top 8 bits, the slot in the next 10, the index of the list's
// thread in the low 14. The Writer does not remember listings in the lists
// of threads whose index does not fit.
type listing uint32

const (
	listingThreads = 1 << 14
	listingSlots   = 1 << 10
)

func makeListing(thread uint32, class uint8, slot int) listing {
	return listing(uint32(class)<<24 | uint32(slot)<<14 | thread)
}

func (l listing) class() uint8   { return uint8(l >> 24) }
func (l listing) slot() int      { return int(l>>14) & (listingSlots - 1) }
func (l listing) thread() uint32 { return uint32(l) & (listingThreads - 1) }

// remember notes that the address of s was pushed where l says, dropping
// the oldest listing if there are too many. (The listings are copied into
// a new array: a copy that may overlap its source calls memmove, which
// costs more than the copy.)
func (s *addrSlot) remember(l listing) {
	lists := [maxListings]listing{l}
	copy(lists[1:], s.lists[:])
	s.lists = lists
}

// forget forgets listing k of s. (A loop costs less than the call to
// memmove of a copy.)
func (s *addrSlot) forget(k int) {
	for ; k < maxListings-1; k++ {
		s.lists[k] = s.lists[k+1]
	}
	s.lists[maxListings-1] = 0
}

// forgetListing forgets l, if s has it.
func (s *addrSlot) forgetListing(l listing) {
	for k, in := range s.lists {
		if in == l {
			s.forget(k)
			return
		}
	}
}

// unused reports whether s says nothing about its address.
func (s *addrSlot) unused() bool { return s.num == 0 && s.lists[0] == 0 }

const minAddrSlots = 1 << 10

// home returns the slot where the probe for addr starts. Fibonacci hashing
// spreads addresses that differ only in a few middle bits, as heap
// addresses do.
func (t *addrTable) home(addr uint64) int {
	return int((addr * 0x9e3779b97f4a7c15) >> t.shift)
}

// find returns the index of the slot of addr and the slot, or -1 and nil
// if addr is not in the table. They are good until the next insert or
// remove.
func (t *addrTable) find(addr uint64) (int, *addrSlot) {
	if t.used == 0 {
		return -1, nil
	}
	mask := len(t.slots) - 1
	for i := t.home(addr); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.gen != t.gen {
			return -1, nil
		}
		if s.addr == addr {
			return i, s
		}
	}
}

// insert returns the index of the slot of addr and the slot, giving addr
// an unused slot if it has none. They are good until the next insert or
// remove.
func (t *addrTable) insert(addr uint64) (int, *addrSlot) {
	if t.used >= len(t.slots)/4 {
		t.grow()
	}
	mask := len(t.slots) - 1
	for i := t.home(addr); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.gen != t.gen {
			*s = addrSlot{addr: addr, gen: t.gen}
			t.used++
			return i, s
		}
		if s.addr == addr {
			return i, s
		}
	}
}

// remove empties slot i without leaving a tombstone: every later slot of
// its run whose probe would have passed through i moves back into the
// hole, which then moves on to where that slot was (backward-shift
// deletion).
func (t *addrTable) remove(i int) {
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.slots[j].gen == t.gen; j = (j + 1) & mask {
		// The entry at j may fill the hole at i unless its home lies
		// cyclically in (i, j]: its probe would not reach i.
		if (j-t.home(t.slots[j].addr))&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i].gen = t.gen - 1
	t.used--
}

func (t *addrTable) grow() {
	old, oldGen := t.slots, t.gen
	n := max(minAddrSlots, 2*len(old))
	t.slots = make([]addrSlot, n)
	t.shift = uint(64 - bits.TrailingZeros(uint(n)))
	t.gen, t.used = 1, 0
	for _, s := range old {
		if s.gen == oldGen {
			_, to := t.insert(s.addr)
			s.gen = t.gen
			*to = s
		}
	}
}

// reset empties the table, keeping its memory.
func (t *addrTable) reset() {
	if t.used == 0 {
		return
	}
	t.used = 0
	t.gen++
	if t.gen == 0 { // slots of generation 0 may be left from long ago
		clear(t.slots)
		t.gen = 1
	}
}
