package trace

import "math/bits"

// addrTable maps the live addresses of a process to their handle numbers
// and size classes, for the Writer. Every alloc puts and every free takes,
// so it is on the hot path of recording: an open-addressing table with
// linear probing, kept at most a quarter full, does both in less than half
// the time a Go map takes (BenchmarkAddrTable).
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
	addr  uint64
	num   uint32
	class uint8
	gen   uint16
}

const minAddrSlots = 1 << 10

// home returns the slot where the probe for addr starts. Fibonacci hashing
// spreads addresses that differ only in a few middle bits, as heap
// addresses do.
func (t *addrTable) home(addr uint64) int {
	return int((addr * 0x9e3779b97f4a7c15) >> t.shift)
}

// put maps addr to num and class, replacing what addr mapped to.
func (t *addrTable) put(addr uint64, num uint32, class uint8) {
	if t.used >= len(t.slots)/4 {
		t.grow()
	}
	mask := len(t.slots) - 1
	for i := t.home(addr); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.gen != t.gen {
			*s = addrSlot{addr: addr, num: num, class: class, gen: t.gen}
			t.used++
			return
		}
		if s.addr == addr {
			s.num, s.class = num, class
			return
		}
	}
}

// take removes addr and returns what it mapped to, or zeros if it was not
// in the table.
func (t *addrTable) take(addr uint64) (num uint32, class uint8) {
	if t.used == 0 {
		return 0, 0
	}
	mask := len(t.slots) - 1
	for i := t.home(addr); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.gen != t.gen {
			return 0, 0
		}
		if s.addr == addr {
			num, class = s.num, s.class
			t.remove(i)
			return num, class
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
			t.put(s.addr, s.num, s.class)
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
