package trace

import (
	"math/rand/v2"
	"testing"
)

// TestAddrTable checks the table against a map through many inserts and
// removes: addresses dense in a few pages, far apart in many pages whose
// home slots in the directory collide, and not 16-byte aligned.
func TestAddrTable(t *testing.T) {
	var table addrTable
	want := map[uint64]uint32{} // num
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 400000 {
		addr := uint64(rng.IntN(5000)) * 16
		switch rng.IntN(6) {
		case 0, 1:
			addr <<= 20 // far apart, one address a page
		case 2:
			addr += uint64(1 + rng.IntN(15)) // unaligned
		case 3:
			addr += 1 << 63 // pages at the top of the address space
		}
		if rng.IntN(2) == 0 {
			num := uint32(i + 1)
			table.set(addr, num)
			want[addr] = num
		} else {
			if num := table.take(addr); num != want[addr] {
				t.Fatalf("step %d: take(%#x) = %d, want %d", i, addr, num, want[addr])
			}
			delete(want, addr)
		}
		if table.used != len(want) {
			t.Fatalf("step %d: table holds %d addresses, want %d", i, table.used, len(want))
		}
		if i%1000 == 0 {
			checkPages(t, &table)
		}
		if i%50000 == 0 {
			table.reset()
			clear(want)
		}
	}
	for addr, num := range want {
		if got := table.take(addr); got != num {
			t.Fatalf("take(%#x) = %d at the end, want %d", addr, got, num)
		}
	}
	if table.used != 0 || table.dir.used != 0 {
		t.Errorf("the emptied table holds %d addresses in %d pages", table.used, table.dir.used)
	}
}

// TestAddrTableMarks checks the marks of listed addresses: a released
// block's slot keeps the mark of its thread if it has a class, a mark is
// never taken for a live handle, and unlist removes only its own.
func TestAddrTableMarks(t *testing.T) {
	var table addrTable
	handles := []handle{{}, {addr: 0x1000, thread: 3, class: 2}, {addr: 0x2000, thread: 1, class: 0}, {addr: 0x3001, thread: 1, class: 2}}
	for num, h := range handles[1:] {
		table.fill(table.place(h.addr), h.addr, uint32(num+1))
	}
	if got := table.release(0x1000, handles); got != 1 {
		t.Fatalf("release(0x1000) = %d, want 1", got)
	}
	if got := table.release(0x1000, handles); got != 0 {
		t.Errorf("release of a listed address = %d, want 0", got)
	}
	if got := table.take(0x1000); got != 0 {
		t.Errorf("take of a listed address = %d, want 0", got)
	}
	if v := peek(&table, 0x1000); v != listedMark|3 {
		t.Errorf("the slot of a listed address holds %#x, want the mark of thread 3", v)
	}
	table.unlist(0x1000, 2) // not its list
	if v := peek(&table, 0x1000); v != listedMark|3 {
		t.Errorf("unlist for another thread removed the mark: %#x", v)
	}
	table.unlist(0x1000, 3)
	if v := peek(&table, 0x1000); v != 0 {
		t.Errorf("unlist left %#x", v)
	}
	table.fill(table.place(0x1000), 0x1000, 4)
	if got := table.release(0x2000, handles); got != 2 {
		t.Fatalf("release(0x2000) = %d, want 2", got)
	}
	if v := peek(&table, 0x2000); v != 0 {
		t.Errorf("the slot of a block without class holds %#x, want 0", v)
	}
	table.fill(table.place(0x2000), 0x2000, 5)
	if got := table.release(0x3001, handles); got != 3 {
		t.Errorf("release of an unaligned address = %d, want 3", got)
	}
	if table.place(0x3001) != nil {
		t.Errorf("an unaligned address has a slot")
	}
	for addr, want := range map[uint64]uint32{0x1000: 4, 0x2000: 5} {
		if got := table.take(addr); got != want {
			t.Errorf("take(%#x) = %d, want %d", addr, got, want)
		}
	}
	if table.used != 0 {
		t.Errorf("the emptied table holds %d slots", table.used)
	}
	checkPages(t, &table)
}

// peek returns what the slot of addr, aligned, holds (0 if it has no page).
func peek(table *addrTable, addr uint64) uint32 {
	idx, ok := table.lookup(addr >> pageBits)
	if !ok {
		return 0
	}
	return table.pages[idx].nums[(addr>>alignBits)&(pageSlots-1)]
}

// checkPages checks that every page handed out is in a chunk or in the
// free list, that free pages are empty, and the live counts of chunks.
func checkPages(t *testing.T, table *addrTable) {
	t.Helper()
	inChunks := 0
	for _, d := range table.dir.slots {
		if d.gen != table.dir.gen {
			continue
		}
		c := &table.chunks[d.num]
		n := 0
		for _, idx := range c.pages {
			if idx != 0 {
				n++
			}
		}
		if n == 0 || uint32(n) != c.live {
			t.Fatalf("chunk %#x has %d pages, counts %d", d.addr, n, c.live)
		}
		inChunks += n
	}
	if inChunks+len(table.free) != table.npages {
		t.Fatalf("%d pages in chunks and %d free, %d handed out", inChunks, len(table.free), table.npages)
	}
	for _, idx := range table.free {
		if table.pageLive[idx] != 0 || table.pages[idx].nums != [pageSlots]uint32{} {
			t.Fatalf("free page %d is not empty", idx)
		}
	}
}

// TestAddrTablePageReuse frees whole pages and allocates others: the
// table reuses the pages it emptied rather than growing, and takes nothing
// for addresses of pages it gave to others.
func TestAddrTablePageReuse(t *testing.T) {
	var table addrTable
	const pages = 8
	for round := range 100 {
		base := uint64(round) << 32
		for a := uint64(0); a < pages<<pageBits; a += 48 {
			table.set(base+a, uint32(a+1))
		}
		if round > 0 {
			prev := uint64(round-1) << 32
			for a := uint64(0); a < pages<<pageBits; a += 16 {
				want := uint32(0)
				if a%48 == 0 {
					want = uint32(a + 1)
				}
				if got := table.take(prev + a); got != want {
					t.Fatalf("round %d: take(%#x) = %d, want %d", round, prev+a, got, want)
				}
			}
		}
		if len(table.pages) > 2*pages {
			t.Fatalf("round %d: the table has %d pages for %d with live blocks", round, len(table.pages), table.dir.used)
		}
	}
}

// TestAddrTableGenerations empties a table more times than its
// directories have generations: nothing from before comes back, and the
// pages of earlier blocks are cleared before their reuse.
func TestAddrTableGenerations(t *testing.T) {
	var table addrTable
	for i := range 1<<16 + 10 {
		if table.take(16) != 0 || table.take(17) != 0 || table.take(uint64(i)*16) != 0 {
			t.Fatalf("reset %d: the table still held an address", i)
		}
		table.set(16, uint32(i+1))
		table.set(17, uint32(i+1))
		table.set(uint64(i)*16+32, 1)
		table.set(uint64(i)<<pageBits, 1)
		table.reset()
	}
}

// BenchmarkAddrTable compares the table with a Go map on what the Writer
// does on a malloc-dense loop: take the address of a random live block,
// put a new one.
func BenchmarkAddrTable(b *testing.B) {
	const live = 4096
	rng := rand.New(rand.NewPCG(7, 8))
	addrs := make([]uint64, 1<<16)
	for i := range addrs {
		addrs[i] = 0x5555_5555_0000 + uint64(rng.IntN(1<<16))*16
	}
	b.Run("table", func(b *testing.B) {
		var table addrTable
		var slots [live]uint64
		i := 0
		for b.Loop() {
			s := i % live
			table.take(slots[s])
			slots[s] = addrs[i&(len(addrs)-1)]
			table.set(slots[s], uint32(i+1))
			i++
		}
	})
	b.Run("map", func(b *testing.B) {
		m := map[uint64]uint32{}
		var slots [live]uint64
		i := 0
		for b.Loop() {
			s := i % live
			delete(m, slots[s])
			slots[s] = addrs[i&(len(addrs)-1)]
			m[slots[s]] = uint32(i + 1)
			i++
		}
	})
	for _, order := range []string{"random", "fifo"} {
		b.Run("heap-"+order, func(b *testing.B) {
			h := newBenchHeap(order == "fifo")
			var table addrTable
			h.fill(&table)
			i := 0
			for b.Loop() {
				if i == len(h.ops) {
					b.StopTimer()
					table.reset()
					h.fill(&table)
					i = 0
					b.StartTimer()
				}
				op := &h.ops[i]
				table.take(op.free)
				table.set(op.alloc, uint32(i+1))
				i++
			}
		})
	}
}

// benchHeap is the address stream of a program with a big heap, as glibc
// lays it out: heapLive blocks of 16 to 200 bytes carved one after the
// other, then frees of live blocks, each followed by an allocation
// that reuses the latest address freed (half of them), an older one, or
// carves a new block at the top of the heap. The frees are of random
// blocks, or with fifo of the blocks in the order they were allocated, as
// a program frees a big structure it built.
type benchHeap struct {
	initial []uint64
	ops     []struct{ free, alloc uint64 }
}

const heapLive = 1 << 19

func newBenchHeap(fifo bool) *benchHeap {
	rng := rand.New(rand.NewPCG(9, 10))
	top := uint64(0x5555_5555_a000)
	carve := func() uint64 {
		addr := top + 16
		top += 32 + uint64(rng.IntN(12))*16
		return addr
	}
	h := &benchHeap{initial: make([]uint64, heapLive)}
	for i := range h.initial {
		h.initial[i] = carve()
	}
	live := append([]uint64(nil), h.initial...)
	var freed []uint64
	h.ops = make([]struct{ free, alloc uint64 }, 1<<21)
	for i := range h.ops {
		s := i % len(live)
		if !fifo {
			s = rng.IntN(len(live))
		}
		freed = append(freed, live[s])
		var addr uint64
		switch r := rng.IntN(4); {
		case r <= 1: // the block just freed, from the tcache
			addr = freed[len(freed)-1]
			freed = freed[:len(freed)-1]
		case r == 2: // an older one, from the bins
			j := rng.IntN(len(freed))
			addr = freed[j]
			freed[j] = freed[len(freed)-1]
			freed = freed[:len(freed)-1]
		default:
			addr = carve()
		}
		h.ops[i].free, h.ops[i].alloc = live[s], addr
		live[s] = addr
	}
	return h
}

func (h *benchHeap) fill(table *addrTable) {
	for i, addr := range h.initial {
		table.set(addr, uint32(i+1))
	}
}
