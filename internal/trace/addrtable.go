package trace

import "math/bits"

// addrTable says, for the Writer, which handle names each live address of
// a process. Every free looks its address up and every alloc adds one, so
// it is on the hot path of recording: an open-addressing table with linear
// probing, kept at most a quarter full, does that in less than half the
// time a Go map takes (BenchmarkAddrTable). It holds only the live blocks,
// which a free removes: with a few thousand of them, it stays in the
// cache. (It once also said where every released address was in the
// class lists, and grew to tens of thousands of addresses and several MiB,
// so that every lookup missed the cache; the Writer now finds depths by
// scanning the lists.)
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
	num  uint32 // the handle of the live block at addr
	gen  uint16
}

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

// set makes num the handle of addr, whether addr had one or not. (A block
// whose free was lost is allocated again while its handle is live: the
// latest handle is the one the next free of the address releases.)
func (t *addrTable) set(addr uint64, num uint32) {
	if t.used >= len(t.slots)/4 {
		t.grow()
	}
	mask := len(t.slots) - 1
	for i := t.home(addr); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.gen != t.gen {
			*s = addrSlot{addr: addr, num: num, gen: t.gen}
			t.used++
			return
		}
		if s.addr == addr {
			s.num = num
			return
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
			t.set(s.addr, s.num)
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
