package analysis

import (
	"maps"
	"math/rand"
	"runtime"
	"testing"
	"time"

	"github.com/memtrail/memtrail/internal/trace"
)

// TestHeapTableModel checks the heap table against a Go map through random
// allocations and frees as the trace Reader hands them out: blocks freed
// in their trace block by handle, those of earlier trace blocks by
// address; before an allocation over a live block of its own trace block,
// a lost free of it (by handle); allocations over blocks of earlier trace
// blocks, which the table must find itself; frees of addresses not live;
// and the address the index cannot key. Few distinct addresses collide
// often, so that probing, deletion and growth are all exercised. In
// "carved", most addresses go up as an allocator's carving fresh memory
// does, so that blocks enter the index in runs of a page. With "flights",
// every trace block's blocks go into the index on a goroutine of their
// own, however few.
func TestHeapTableModel(t *testing.T) {
	t.Run("random", func(t *testing.T) { testHeapTableModel(t, false) })
	t.Run("carved", func(t *testing.T) { testHeapTableModel(t, true) })
	t.Run("random, flights", func(t *testing.T) { flyAll(t); testHeapTableModel(t, false) })
	t.Run("carved, flights", func(t *testing.T) { flyAll(t); testHeapTableModel(t, true) })
	// On one core a flight's goroutine seldom runs before the table
	// needs the index: the table does the flight's work itself.
	t.Run("carved, flights, one core", func(t *testing.T) {
		flyAll(t)
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		testHeapTableModel(t, true)
	})
}

// flyAll makes every trace block's blocks go into the index on a flight,
// for the rest of test t.
func flyAll(t *testing.T) {
	oldMin, oldGrounded := flightMin, groundedBlocks
	flightMin, groundedBlocks = 1, 0
	t.Cleanup(func() { flightMin, groundedBlocks = oldMin, oldGrounded })
}

func testHeapTableModel(t *testing.T, carved bool) {
	var h heapTable
	type live struct {
		size   uint64
		handle uint32 // 0 if it was allocated in an earlier trace block
	}
	want := map[uint64]live{}
	var blk uint32 = 1
	var nextHandle uint32
	r := rand.New(rand.NewSource(1))
	var cursor uint64
	addrOf := func() uint64 {
		if r.Intn(500) == 0 {
			return 0
		}
		if carved && r.Intn(8) != 0 {
			cursor = cursor%(3000*16) + 16*uint64(1+r.Intn(3))
			return cursor
		}
		return uint64(r.Intn(3000)+1) * 16
	}
	for i := range 300000 {
		switch op := r.Intn(10); {
		case op == 0 && r.Intn(50) == 0:
			// A new trace block: handles start again.
			blk++
			nextHandle = 0
			for addr, l := range want {
				want[addr] = live{size: l.size}
			}
		case op < 4:
			addr := addrOf()
			if l, ok := want[addr]; ok && l.handle != 0 {
				if b, ok := h.take(addr, l.handle, blk); !ok || b.size != l.size {
					t.Fatalf("op %d: lost free of %#x (handle %d) took %v, want the block of size %d", i, addr, l.handle, ok, l.size)
				}
				delete(want, addr)
			}
			nextHandle++
			size := uint64(i)
			old, replaced := h.put(addr, nextHandle, blk, &block{size: size})
			l, had := want[addr]
			if replaced != had || replaced && old.size != l.size {
				t.Fatalf("op %d: put(%#x) replaced %v, want %v (size %d)", i, addr, replaced, had, l.size)
			}
			want[addr] = live{size: size, handle: nextHandle}
		default:
			// A free: by handle if the block is of this trace block, else
			// by address, of a block of an earlier one or of none.
			addr := addrOf()
			l, had := want[addr]
			b, freed := h.free(addr, l.handle, blk, 0)
			if freed != had || freed && b.size != l.size {
				t.Fatalf("op %d: free(%#x, handle %d) freed %v, want %v (size %d)", i, addr, l.handle, freed, had, l.size)
			}
			delete(want, addr)
		}
		if i%1000 == 0 && h.len() != len(want) {
			t.Fatalf("op %d: %d live blocks, want %d", i, h.len(), len(want))
		}
	}
	n := 0
	h.each(func(addr uint64, b *block) {
		n++
		if l, ok := want[addr]; !ok || l.size != b.size {
			t.Errorf("each: block at %#x of size %d, want %d (live %v)", addr, b.size, l.size, ok)
		}
	})
	if n != len(want) {
		t.Errorf("each saw %d blocks, want %d", n, len(want))
	}
	// A clone holds the same blocks, found by address; changing it leaves
	// t alone.
	c := h.clone()
	for addr, l := range want {
		if b, ok := c.free(addr, 0, blk+1, 0); !ok || b.size != l.size {
			t.Fatalf("clone: free(%#x) = %v; want the block of size %d", addr, ok, l.size)
		}
	}
	if c.len() != 0 || h.len() != len(want) {
		t.Errorf("after freeing all of the clone: %d live in it, %d in the original; want 0 and %d", c.len(), h.len(), len(want))
	}
}

// TestHeapTableIndexed checks the heap table once many blocks outlive
// their trace block: no allocation over one of them, nor a free of one,
// may go unseen.
func TestHeapTableIndexed(t *testing.T) {
	var h heapTable
	const n = 70_000
	addr := func(i int) uint64 { return 0x100000 + uint64(i)*48 }
	for i := range n {
		h.put(addr(i), uint32(i+1), 1, &block{size: uint64(i)})
	}
	// In the next trace block, every block is found by address.
	for i := 0; i < n; i += 2 {
		if b, ok := h.free(addr(i), 0, 2, 0); !ok || b.size != uint64(i) {
			t.Fatalf("free of block %d: %v", i, ok)
		}
	}
	for i := 1; i < n; i += 4 {
		if old, replaced := h.put(addr(i), uint32(i), 2, &block{size: 1}); !replaced || old.size != uint64(i) {
			t.Fatalf("allocation over block %d: replaced %v", i, replaced)
		}
	}
	// Addresses freed, far away, and in pages of no block: none live.
	for _, a := range []uint64{addr(0), addr(n + 1000), 0x7f00_0000_0000} {
		if _, ok := h.free(a, 0, 2, 0); ok {
			t.Errorf("free of %#x found a block", a)
		}
	}
	if want := n / 2; h.len() != want {
		t.Errorf("%d live blocks, want %d", h.len(), want)
	}
	if want := n/2 - n/4; h.indexNow().Len() != want {
		t.Errorf("%d blocks indexed, want the %d from the first trace block still live", h.indexNow().Len(), want)
	}
}

// len returns how many blocks are live.
func (t *heapTable) len() int {
	n := 0
	t.each(func(uint64, *block) { n++ })
	return n
}

// TestHeapTableClones checks that a clone and its original, which share
// their chunks until one writes (copy on write), go their own ways: random
// allocations and frees on each, and on a clone of a clone, each checked
// against its own map.
func TestHeapTableClones(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	type table struct {
		h    heapTable
		want map[uint64]uint64 // size by address
	}
	step := func(tb *table, i int) {
		addr := uint64(r.Intn(20000)+1) * 16
		if r.Intn(2) == 0 {
			tb.h.free(addr, 0, 1, 0)
			delete(tb.want, addr)
			return
		}
		tb.h.put(addr, 0, 1, &block{size: uint64(i)})
		tb.want[addr] = uint64(i)
	}
	check := func(name string, tb *table) {
		t.Helper()
		n := 0
		tb.h.each(func(addr uint64, b *block) {
			n++
			if size, ok := tb.want[addr]; !ok || size != b.size {
				t.Fatalf("%s: block at %#x of size %d, want %d (live %v)", name, addr, b.size, size, ok)
			}
		})
		if n != len(tb.want) {
			t.Fatalf("%s: %d live blocks, want %d", name, n, len(tb.want))
		}
		for addr, size := range tb.want {
			if ref, ok := tb.h.indexNow().Find(addr); !ok || tb.h.unpack(ref).size != size {
				t.Fatalf("%s: %#x not found by address", name, addr)
			}
		}
	}
	orig := &table{want: map[uint64]uint64{}}
	for i := range 30000 {
		step(orig, i)
	}
	clone := func(tb *table) *table {
		c := &table{h: tb.h.clone(), want: make(map[uint64]uint64, len(tb.want))}
		for a, s := range tb.want {
			c.want[a] = s
		}
		return c
	}
	a := clone(orig)
	for i := range 20000 {
		step(orig, 100000+i)
		step(a, 200000+i)
	}
	b := clone(a)
	for i := range 20000 {
		step(a, 300000+i)
		step(b, 400000+i)
		step(orig, 500000+i)
	}
	check("original", orig)
	check("clone", a)
	check("clone of the clone", b)
}

// TestHeapTableGrowsApart checks tables whose arenas grow past
// spareAfter chunks, so that their next chunks are made ahead: a clone of
// one, and the original, then grow each their own way.
func TestHeapTableGrowsApart(t *testing.T) {
	const n = (spareAfter + 2) << chunkBits
	var orig heapTable
	for i := range n {
		orig.put(0x10000+uint64(i)*32, uint32(i+1), 1, &block{size: uint64(i)})
	}
	c := orig.clone()
	for i := range n {
		orig.put(0x1000_0000+uint64(i)*32, uint32(i+1), 2, &block{size: 1})
		c.put(0x2000_0000+uint64(i)*32, uint32(i+1), 2, &block{size: 2})
	}
	for _, tc := range []struct {
		name string
		h    *heapTable
		size uint64 // of the blocks allocated after the clone
		base uint64 // and their addresses
	}{{"original", &orig, 1, 0x1000_0000}, {"clone", &c, 2, 0x2000_0000}} {
		got := 0
		tc.h.each(func(addr uint64, b *block) {
			got++
			switch {
			case addr >= tc.base && addr < tc.base+n*32:
				if b.size != tc.size {
					t.Fatalf("%s: block at %#x of size %d, want %d", tc.name, addr, b.size, tc.size)
				}
			case addr >= 0x10000 && addr < 0x10000+n*32:
				if want := (addr - 0x10000) / 32; b.size != want {
					t.Fatalf("%s: block at %#x of size %d, want %d", tc.name, addr, b.size, want)
				}
			default:
				t.Fatalf("%s: a block at %#x", tc.name, addr)
			}
		})
		if got != 2*n {
			t.Errorf("%s: %d live blocks, want %d", tc.name, got, 2*n)
		}
	}
}

// TestHeapTablePacking checks that every field of a block comes back as
// it went in, whether it fits the packed arena or not (a size of 4 GiB or
// more, a high thread index, many reallocs, a late allocation clock, an
// API past the packed bits), through take, each, update and clone, against
// a Go map of the blocks.
func TestHeapTablePacking(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	field := func(small, big uint64) uint64 {
		if r.Intn(8) == 0 {
			return small + uint64(r.Int63n(int64(big)))
		}
		return uint64(r.Int63n(int64(small)))
	}
	randomBlock := func() block {
		return block{
			size:      field(1<<32, 1<<40),
			born:      r.Uint64(),
			bornClock: field(1<<clockBits, 1<<50),
			reallocs:  uint32(field(1<<reallocsBits, 1<<20)),
			site:      int32(r.Intn(1000)) - 1,
			thread:    uint32(field(1<<threadBits, maxThreads)),
			api:       trace.API(field(1<<apiBits, 200)),
		}
	}
	var h heapTable
	want := map[uint64]block{}
	var blk uint32 = 1
	handles := map[uint64]uint32{}
	var nextHandle uint32
	check := func(name string, h *heapTable, want map[uint64]block) {
		t.Helper()
		n := 0
		h.each(func(addr uint64, b *block) {
			n++
			if w, ok := want[addr]; !ok || w != *b {
				t.Fatalf("%s: block at %#x is %+v, want %+v (live %v)", name, addr, *b, w, ok)
			}
		})
		if n != len(want) {
			t.Fatalf("%s: %d live blocks, want %d", name, n, len(want))
		}
	}
	for i := range 50000 {
		addr := uint64(r.Intn(4000)+1) * 16
		switch op := r.Intn(10); {
		case op == 0:
			blk++
			clear(handles)
			nextHandle = 0
		case op < 5:
			if w, ok := want[addr]; ok {
				b, live := h.free(addr, handles[addr], blk, 0)
				if !live || *b != w {
					t.Fatalf("op %d: free(%#x) = %+v, %v; want %+v", i, addr, b, live, w)
				}
				delete(want, addr)
				delete(handles, addr)
			}
			nextHandle++
			b := randomBlock()
			h.put(addr, nextHandle, blk, &b)
			want[addr], handles[addr] = b, nextHandle
		default:
			w, had := want[addr]
			b, live := h.free(addr, handles[addr], blk, 0)
			if live != had || live && *b != w {
				t.Fatalf("op %d: free(%#x) = %+v, %v; want %+v, %v", i, addr, b, live, w, had)
			}
			delete(want, addr)
			delete(handles, addr)
		}
	}
	check("table", &h, want)
	c := h.clone()
	h.update(func(b *block) { b.thread, b.reallocs = 1<<20, b.reallocs+1 })
	for addr, b := range want {
		b.thread, b.reallocs = 1<<20, b.reallocs+1
		want[addr] = b
	}
	check("updated", &h, want)
	c.update(func(b *block) { b.thread = 0 })
	cwant := map[uint64]block{}
	for addr, b := range want {
		b.thread, b.reallocs = 0, b.reallocs-1
		cwant[addr] = b
	}
	check("clone, updated apart", &c, cwant)
}

// TestHeapTableDamagedHandles checks the blocks of a damaged trace's
// handles as they move into the index: a handle given to two blocks (the
// first is a stray, found neither by handle nor by address), two handles
// at one address (the later wins the address when they move), and a free
// that names a handle at another address.
func TestHeapTableDamagedHandles(t *testing.T) {
	t.Run("at once", testHeapTableDamagedHandles)
	t.Run("flights", func(t *testing.T) { flyAll(t); testHeapTableDamagedHandles(t) })
}

func testHeapTableDamagedHandles(t *testing.T) {
	const a, b, c, d, f, e = 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000
	var h heapTable
	h.put(a, 1, 1, &block{size: 1})
	h.put(b, 1, 1, &block{size: 2}) // handle 1 again: a is a stray
	h.put(c, 2, 1, &block{size: 3})
	h.put(c, 3, 1, &block{size: 4}) // no lost free of the first at c
	if _, ok := h.take(d, 3, 1); ok {
		t.Fatal("a free at d by the handle of a block at c found a block")
	}
	if got, ok := h.free(c, 2, 1, 0); !ok || got.size != 3 {
		t.Fatalf("free of c by handle 2: %v, %v; want the block of size 3", got, ok)
	}
	h.put(f, 5, 1, &block{size: 5})
	h.put(f, 6, 1, &block{size: 6})
	h.put(e, 0, 2, &block{size: 7}) // the next trace block: the handles move
	want := map[uint64]uint64{a: 1, b: 2, c: 4, f: 6, e: 7}
	got := map[uint64]uint64{}
	h.each(func(addr uint64, bl *block) {
		if _, dup := got[addr]; dup {
			t.Errorf("each gave %#x twice", addr)
		}
		got[addr] = bl.size
	})
	if !maps.Equal(got, want) {
		t.Errorf("each gave %v, want %v", got, want)
	}
	for _, addr := range []uint64{b, c, f, e} {
		if bl, ok := h.free(addr, 0, 2, 0); !ok || bl.size != want[addr] {
			t.Errorf("free of %#x by address: %v, %v; want size %d", addr, bl, ok, want[addr])
		}
	}
	if _, ok := h.free(a, 0, 2, 0); ok {
		t.Error("the stray at a was found by address")
	}
	if n := h.len(); n != 1 {
		t.Errorf("%d live blocks, want the stray alone", n)
	}
}

// TestHeapTableGrounded checks that a flight the table needs before it
// has landed grounds the next trace blocks, whose blocks then go into the
// index at once, and that flights take off again after them. On one core
// the flight's goroutine does not run before the table needs the index.
func TestHeapTableGrounded(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	oldMin, oldGrounded := flightMin, groundedBlocks
	flightMin, groundedBlocks = 1, 2
	defer func() { flightMin, groundedBlocks = oldMin, oldGrounded }()
	var h heapTable
	addr := func(blk, i int) uint64 { return 0x100000 + uint64(blk*1000+i)*32 }
	for blk := 1; blk <= 5; blk++ {
		for i := range 10 {
			h.put(addr(blk, i), uint32(i+1), uint32(blk), &block{size: uint64(blk)})
		}
		flying := h.flight != nil
		if want := blk == 2 || blk == 5; flying != want {
			t.Errorf("trace block %d: blocks of the one before on a flight %v, want %v", blk, flying, want)
		}
		// An address of the trace block before: the index is needed
		// now.
		if blk > 1 {
			if b, ok := h.free(addr(blk-1, 0), 0, uint32(blk), 0); !ok || b.size != uint64(blk-1) {
				t.Fatalf("trace block %d: free of a block of the one before: %v, %v", blk, b, ok)
			}
		}
	}
	if n := h.len(); n != 5*10-4 {
		t.Errorf("%d live blocks, want %d", n, 5*10-4)
	}
}

// TestHighTable checks the highest address kept for each 2 MiB against a
// map, over more 2 MiB than the table keeps near, some 64 MiB apart as
// glibc's arenas are, and through a clone.
func TestHighTable(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	var h highTable
	want := map[uint64]uint64{}
	check := func(h *highTable, want map[uint64]uint64) {
		t.Helper()
		for range 2000 {
			k := uint64(r.Intn(600))
			if r.Intn(2) == 0 {
				k = uint64(r.Intn(20)) * 32 // 64 MiB apart
			}
			if got := *h.slot(k<<highBits | uint64(r.Intn(1<<highBits))); got != want[k] {
				t.Fatalf("2 MiB number %d: highest %#x, want %#x", k, got, want[k])
			}
		}
	}
	for range 20000 {
		k := uint64(r.Intn(300))
		if r.Intn(2) == 0 {
			k = uint64(r.Intn(20)) * 32
		}
		addr := k<<highBits | uint64(r.Intn(1<<highBits))
		h.add(addr)
		want[k] = max(want[k], addr)
	}
	check(&h, want)
	c := h.clone()
	cwant := maps.Clone(want)
	for k := uint64(0); k < 600; k += 7 {
		c.add(k<<highBits | (1<<highBits - 1))
		cwant[k] = k<<highBits | (1<<highBits - 1)
	}
	check(&c, cwant)
	check(&h, want)
}

// TestHeapTableSparesAhead checks that a table growing past spareAfter
// chunks has sparesAhead chunks made ahead, and again after it takes one.
func TestHeapTableSparesAhead(t *testing.T) {
	var h heapTable
	put := func(n int) {
		for range n {
			i := h.refs
			h.put(0x10000+uint64(i)*32, 0, 1, &block{size: 16})
		}
	}
	ahead := func(when string) {
		deadline := time.Now().Add(10 * time.Second)
		for len(h.spare) < sparesAhead && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if n := len(h.spare); n != sparesAhead || cap(h.spare) != sparesAhead {
			t.Fatalf("%s: %d chunks made ahead (room for %d), want %d", when, n, cap(h.spare), sparesAhead)
		}
	}
	put(spareAfter << chunkBits)
	ahead("at spareAfter chunks")
	put(1 << chunkBits)
	ahead("a chunk later")
	if len(h.arena) != spareAfter+1 {
		t.Fatalf("%d chunks in the arena, want %d", len(h.arena), spareAfter+1)
	}
}
