package addrmap

import (
	"fmt"
	"maps"
	"math/rand"
	"testing"
)

// TestModel checks a Map against a map, with
// addresses packed in pages, spread one to a page and over chunks, not
// aligned, and 0; that Each gives them all; and that the pages and chunks of removed blocks are
// given back, so that the index does not grow with the blocks it held.
func TestModel(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	pick := func() uint64 {
		switch r.Intn(6) {
		case 0:
			return 0x55_0000_0000 + uint64(r.Intn(1<<14))*16 // packed: 64 pages
		case 1:
			return 0x7f00_0000_0000 + uint64(r.Intn(1<<10))<<idxPageBits // one a page
		case 2:
			return uint64(r.Intn(1<<10)) << 30 // one a chunk
		case 3:
			return 0x55_0000_0000 + uint64(r.Intn(1<<12))*16 + 8 // 8-byte aligned, among the others
		case 4:
			if r.Intn(4) == 0 {
				return 0x55_0000_0000 + uint64(r.Intn(1<<10))*16 + 4 // not aligned
			}
		}
		return 0
	}
	var x Map
	want := map[uint64]uint32{}
	for round := range 3 {
		for i := range 100_000 {
			addr := pick()
			if r.Intn(2) == 0 {
				old, had := x.Put(addr, uint32(i))
				if w, ok := want[addr]; had != ok || had && old != w {
					t.Fatalf("put(%#x) = %d, %v; want %d, %v", addr, old, had, w, ok)
				}
				want[addr] = uint32(i)
			} else {
				x.Remove(addr)
				delete(want, addr)
			}
			w, wok := want[addr]
			if ref, ok := x.Find(addr); ok != wok || ok && ref != w {
				t.Fatalf("find(%#x) = %d, %v after the change; want %d, %v", addr, ref, ok, w, wok)
			}
		}
		for addr, ref := range want {
			if got, ok := x.Find(addr); !ok || got != ref {
				t.Fatalf("round %d: find(%#x) = %d, %v; want %d", round, addr, got, ok, ref)
			}
		}
		seen := map[uint64]uint32{}
		x.Each(func(addr uint64, v uint32) {
			if _, dup := seen[addr]; dup {
				t.Fatalf("round %d: Each gave %#x twice", round, addr)
			}
			seen[addr] = v
		})
		if !maps.Equal(seen, want) {
			t.Fatalf("round %d: Each gave %d addresses, want %d (or other values)", round, len(seen), len(want))
		}
		// In three parts, each address comes once.
		clear(seen)
		for part := range 3 {
			x.EachOf(part, 3, func(addr uint64, v uint32) {
				if _, dup := seen[addr]; dup {
					t.Fatalf("round %d: EachOf gave %#x twice", round, addr)
				}
				seen[addr] = v
			})
		}
		if !maps.Equal(seen, want) {
			t.Fatalf("round %d: EachOf gave %d addresses, want %d (or other values)", round, len(seen), len(want))
		}
		if x.Len() != len(want) {
			t.Fatalf("round %d: %d indexed, want %d", round, x.n, len(want))
		}
		// Empty it: every page and chunk goes back.
		for addr := range want {
			x.Remove(addr)
			delete(want, addr)
		}
		if x.n != 0 || len(x.dir) != 0 || len(x.odd) != 0 || len(x.freePages) != int(x.npages) || len(x.freeChunks) != len(x.chunks) {
			t.Fatalf("round %d, emptied: %d indexed, %d chunks in the directory, %d odd, %d of %d pages and %d of %d chunks free",
				round, x.n, len(x.dir), len(x.odd), len(x.freePages), x.npages, len(x.freeChunks), len(x.chunks))
		}
		if _, ok := x.Find(0x55_0000_0000); ok {
			t.Fatalf("round %d: emptied, and find found a block", round)
		}
	}
	// Three rounds over the same addresses need no more pages than one.
	if limit := 64 + 1<<10 + 1<<10; int(x.npages) > limit {
		t.Errorf("%d pages made for at most %d pages of address space", x.npages, limit)
	}
}

// TestClone checks that a clone and its original, which share their pages
// until one writes (copy on write), go their own ways, each checked
// against its own map.
func TestClone(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	type table struct {
		x    Map
		want map[uint64]uint32
	}
	step := func(tb *table, i int) {
		addr := 0x55_0000_0000 + uint64(r.Intn(1<<16))*8
		if r.Intn(2) == 0 {
			tb.x.Remove(addr)
			delete(tb.want, addr)
			return
		}
		tb.x.Put(addr, uint32(i))
		tb.want[addr] = uint32(i)
	}
	check := func(name string, tb *table) {
		t.Helper()
		got := map[uint64]uint32{}
		tb.x.Each(func(addr uint64, v uint32) { got[addr] = v })
		if !maps.Equal(got, tb.want) || tb.x.Len() != len(tb.want) {
			t.Fatalf("%s: %d values, want %d (or other values)", name, len(got), len(tb.want))
		}
		for addr, v := range tb.want {
			if got, ok := tb.x.Find(addr); !ok || got != v {
				t.Fatalf("%s: find(%#x) = %d, %v; want %d", name, addr, got, ok, v)
			}
		}
	}
	orig := &table{want: map[uint64]uint32{}}
	for i := range 50000 {
		step(orig, i)
	}
	a := &table{x: orig.x.Clone(), want: maps.Clone(orig.want)}
	for i := range 30000 {
		step(orig, 100000+i)
		step(a, 200000+i)
	}
	b := &table{x: a.x.Clone(), want: maps.Clone(a.want)}
	for i := range 30000 {
		step(a, 300000+i)
		step(b, 400000+i)
	}
	check("original", orig)
	check("clone", a)
	check("clone of the clone", b)
}

// TestAbsentChunks checks the lookups of chunks the map does not have,
// which it remembers as absent: a chunk added, emptied or sharing a place
// in the cache of chunks with another must be found as it is now.
func TestAbsentChunks(t *testing.T) {
	const chunk = 1 << (idxPageBits + idxChunkBits)
	a := uint64(0x7000_0000_0000)
	b := a + nearChunks*chunk // the same place in the cache as a
	var x Map
	x.Put(b, 2)
	for round := range 3 {
		if _, ok := x.Find(a); ok {
			t.Fatalf("round %d: found %#x before it was put", round, a)
		}
		if _, ok := x.Remove(a + 8); ok {
			t.Fatalf("round %d: removed %#x before it was put", round, a+8)
		}
		x.Put(a, 1)
		if v, ok := x.Find(a); !ok || v != 1 {
			t.Fatalf("round %d: find(%#x) = %d, %v after put; want 1", round, a, v, ok)
		}
		if v, ok := x.Find(b); !ok || v != 2 {
			t.Fatalf("round %d: find(%#x) = %d, %v; want 2", round, b, v, ok)
		}
		if _, ok := x.Find(a + 8); ok {
			t.Fatalf("round %d: found %#x, never put", round, a+8)
		}
		x.Remove(a)
		if _, ok := x.Find(a); ok {
			t.Fatalf("round %d: found %#x after its chunk emptied", round, a)
		}
	}
}

// TestPutAll checks PutAll against a map: batches of ascending runs in
// one page (into empty pages, after a page's blocks and among them),
// runs that meet blocks already there, addresses twice in a batch, not
// aligned, in random order, each batch followed by some removals.
func TestPutAll(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	var x Map
	want := map[uint64]uint32{}
	var olds []uint32
	v := uint32(0)
	for round := range 2_000 {
		var addrs []uint64
		var vals []uint32
		for range 1 + r.Intn(8) {
			base := 0x55_0000_0000 + uint64(r.Intn(64))<<idxPageBits
			switch r.Intn(5) {
			case 0: // random order, maybe twice, maybe not aligned
				for range r.Intn(20) {
					a := base + uint64(r.Intn(idxPageSlots))*8
					if r.Intn(10) == 0 {
						a += 4
					}
					addrs = append(addrs, a)
				}
			default: // up in one page, from some slot, by some stride
				slot, stride := r.Intn(idxPageSlots), 1+r.Intn(12)
				for n := r.Intn(100); n > 0 && slot < idxPageSlots; n-- {
					addrs = append(addrs, base+uint64(slot)*8)
					slot += stride
				}
			}
		}
		// The olds are the values replaced, in any order: the model's
		// replaced values, counted.
		wantOlds := map[uint32]int{}
		for _, a := range addrs {
			v++
			vals = append(vals, v)
			if old, ok := want[a]; ok {
				wantOlds[old]++
			}
			want[a] = v
		}
		olds = x.PutAll(addrs, vals, olds[:0])
		gotOlds := map[uint32]int{}
		for _, o := range olds {
			gotOlds[o]++
		}
		if !maps.Equal(gotOlds, wantOlds) {
			t.Fatalf("round %d: PutAll replaced %v, want %v", round, gotOlds, wantOlds)
		}
		if x.Len() != len(want) {
			t.Fatalf("round %d: %d indexed, want %d", round, x.Len(), len(want))
		}
		for a, w := range want {
			if got, ok := x.Find(a); !ok || got != w {
				t.Fatalf("round %d: find(%#x) = %d, %v; want %d", round, a, got, ok, w)
			}
			if r.Intn(3) == 0 {
				if got, ok := x.Remove(a); !ok || got != w {
					t.Fatalf("round %d: remove(%#x) = %d, %v; want %d", round, a, got, ok, w)
				}
				delete(want, a)
			}
		}
	}
	seen := map[uint64]uint32{}
	x.Each(func(a uint64, v uint32) { seen[a] = v })
	if !maps.Equal(seen, want) {
		t.Fatalf("Each gave %d addresses, want %d (or other values)", len(seen), len(want))
	}
}

// TestPutAllShared checks that PutAll into a clone leaves the original
// as it was (copy on write).
func TestPutAllShared(t *testing.T) {
	var x Map
	x.PutAll([]uint64{0x1000, 0x1010, 0x1020}, []uint32{1, 2, 3}, nil)
	c := x.Clone()
	c.PutAll([]uint64{0x1008, 0x1018, 0x1028}, []uint32{4, 5, 6}, nil)
	for a, want := range map[uint64]uint32{0x1000: 1, 0x1010: 2, 0x1020: 3} {
		if got, ok := x.Find(a); !ok || got != want {
			t.Errorf("original: find(%#x) = %d, %v; want %d", a, got, ok, want)
		}
	}
	if _, ok := x.Find(0x1008); ok || x.Len() != 3 {
		t.Errorf("original has the clone's blocks: %d blocks", x.Len())
	}
	for a, want := range map[uint64]uint32{0x1000: 1, 0x1008: 4, 0x1010: 2, 0x1018: 5, 0x1020: 3, 0x1028: 6} {
		if got, ok := c.Find(a); !ok || got != want {
			t.Errorf("clone: find(%#x) = %d, %v; want %d", a, got, ok, want)
		}
	}
}

// benchmarkInsert puts 1M blocks of 48 bytes, in address order, into an
// empty Map, in batches of 4,096, as the analysis enters a trace block's
// surviving blocks: one at a time, or each batch through PutAll.
func benchmarkInsert(b *testing.B, all bool) {
	const n, batch = 1 << 20, 4096
	addrs := make([]uint64, n)
	vals := make([]uint32, n)
	for i := range addrs {
		addrs[i], vals[i] = 0x5555_0000_0000+uint64(i)*48, uint32(i)
	}
	for b.Loop() {
		var x Map
		for i := 0; i < n; i += batch {
			if all {
				x.PutAll(addrs[i:i+batch], vals[i:i+batch], nil)
				continue
			}
			for k := i; k < i+batch; k++ {
				x.Put(addrs[k], vals[k])
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/block")
}

func BenchmarkPut(b *testing.B)    { benchmarkInsert(b, false) }
func BenchmarkPutAll(b *testing.B) { benchmarkInsert(b, true) }

// Frees in address order take blocks from the front of a page (see
// Remove), and blocks put back after go where they belong.
func TestRemoveInOrder(t *testing.T) {
	const base, n = 0x55_0000_0000, idxPageSlots
	var x Map
	want := map[uint64]uint32{}
	for i := range uint64(n) {
		x.Put(base+i*8, uint32(i))
		want[base+i*8] = uint32(i)
	}
	for round := range 3 {
		for i := uint64(round % 2); i < n; i += 2 {
			w, wok := want[base+i*8]
			if v, ok := x.Remove(base + i*8); ok != wok || v != w {
				t.Fatalf("round %d: remove(%#x) = %d, %v; want %d, %v", round, base+i*8, v, ok, w, wok)
			}
			delete(want, base+i*8)
		}
		for i := uint64(round % 2); i < n; i += 4 {
			v := uint32(round<<16) | uint32(i)
			x.Put(base+i*8, v)
			want[base+i*8] = v
		}
		seen := map[uint64]uint32{}
		x.Each(func(addr uint64, v uint32) { seen[addr] = v })
		if !maps.Equal(seen, want) {
			t.Fatalf("round %d: the map holds %d addresses, want %d (or other values)", round, len(seen), len(want))
		}
		for addr, v := range want {
			if got, ok := x.Find(addr); !ok || got != v {
				t.Fatalf("round %d: find(%#x) = %d, %v; want %d", round, addr, got, ok, v)
			}
		}
	}
}

// TestRemoveUpwards checks the ranks Remove counts from the block it
// removed last (Map.removed): frees that go up a page by steps short and
// long, across its words and into the next page, mixed with blocks put
// below and above them one by one and in runs, and with frees of
// addresses that hold none; each against a map.
func TestRemoveUpwards(t *testing.T) {
	const base = 0x55_0000_0000
	r := rand.New(rand.NewSource(2))
	var x Map
	want := map[uint64]uint32{}
	check := func(step int, what string, addr uint64, got uint32, ok bool) {
		t.Helper()
		w, wok := want[addr]
		if ok != wok || ok && got != w {
			t.Fatalf("step %d: %s(%#x) = %d, %v; want %d, %v", step, what, addr, got, ok, w, wok)
		}
	}
	next := uint64(base)
	for step := range 200_000 {
		v := uint32(step)
		switch k := r.Intn(10); {
		case k < 5: // the next free up
			next += uint64(1+r.Intn(3)) * 8
			if r.Intn(8) == 0 {
				next += uint64(r.Intn(300)) * 8 // across words, or pages
			}
			if next >= base+4<<idxPageBits {
				next = base + uint64(r.Intn(64))*8
			}
			old, ok := x.Remove(next)
			check(step, "remove", next, old, ok)
			delete(want, next)
		case k < 8: // one block, near the frees
			addr := next + uint64(r.Intn(64)-32)*8
			old, ok := x.Put(addr, v)
			check(step, "put", addr, old, ok)
			want[addr] = v
		case k < 9: // a run up from near them
			addr := next + uint64(r.Intn(64)-16)*8
			var addrs []uint64
			var vals []uint32
			for i := range 1 + r.Intn(20) {
				addrs = append(addrs, addr)
				vals = append(vals, v+uint32(i)<<20)
				addr += uint64(1+r.Intn(4)) * 8
			}
			olds := x.PutAll(addrs, vals, nil)
			had := 0
			for i, a := range addrs {
				if _, ok := want[a]; ok {
					had++
				}
				want[a] = vals[i]
			}
			if len(olds) != had {
				t.Fatalf("step %d: PutAll replaced %d values, want %d", step, len(olds), had)
			}
		default: // whole pages, so that every slot gets blocks again
			for i := range uint64(idxPageSlots) {
				addr := base + uint64(r.Intn(4))<<idxPageBits + i*8
				x.Put(addr, v)
				want[addr] = v
			}
		}
	}
	if x.Len() != len(want) {
		t.Fatalf("%d indexed, want %d", x.Len(), len(want))
	}
	for addr, v := range want {
		if got, ok := x.Find(addr); !ok || got != v {
			t.Fatalf("find(%#x) = %d, %v; want %d", addr, got, ok, v)
		}
	}
	seen := map[uint64]uint32{}
	x.Each(func(addr uint64, v uint32) { seen[addr] = v })
	if !maps.Equal(seen, want) {
		t.Fatalf("the map holds %d addresses, want %d (or other values)", len(seen), len(want))
	}
}

// TestGoneSlots checks a page while the values of the blocks removed from
// it are still in its vals (Map.gone): frees in address order, mixed with
// lookups, puts at the slots just freed and at others, runs put into the
// page, clones that go on apart, and the page emptied; each against a map,
// and the whole map gone over with Each and EachOf after every change.
func TestGoneSlots(t *testing.T) {
	const base = 0x55_0000_0000
	r := rand.New(rand.NewSource(3))
	type table struct {
		x    Map
		want map[uint64]uint32
	}
	check := func(step int, name string, tb *table) {
		t.Helper()
		got := map[uint64]uint32{}
		tb.x.Each(func(addr uint64, v uint32) { got[addr] = v })
		for part := range 2 {
			tb.x.EachOf(part, 2, func(addr uint64, v uint32) {
				if got[addr] != v {
					t.Fatalf("step %d, %s: EachOf gave %#x = %d, Each %d", step, name, addr, v, got[addr])
				}
			})
		}
		if !maps.Equal(got, tb.want) || tb.x.Len() != len(tb.want) {
			t.Fatalf("step %d, %s: %d values (Len %d), want %d (or other values)", step, name, len(got), tb.x.Len(), len(tb.want))
		}
		for addr, v := range tb.want {
			if got, ok := tb.x.Find(addr); !ok || got != v {
				t.Fatalf("step %d, %s: find(%#x) = %d, %v; want %d", step, name, addr, got, ok, v)
			}
		}
	}
	tables := []*table{{want: map[uint64]uint32{}}}
	for step := range 3000 {
		tb := tables[r.Intn(len(tables))]
		page := base + uint64(r.Intn(3))<<idxPageBits
		v := uint32(step)
		switch k := r.Intn(12); {
		case k < 2: // fill the page, every other slot or every one
			stride := uint64(1 + r.Intn(2))
			for i := uint64(0); i < idxPageSlots; i += stride {
				tb.x.Put(page+i*8, v)
				tb.want[page+i*8] = v
			}
		case k < 7: // free a stretch of it upwards
			from := uint64(r.Intn(idxPageSlots))
			for i := from; i < min(from+uint64(r.Intn(100)), idxPageSlots); i += uint64(1 + r.Intn(2)) {
				addr := page + i*8
				w, wok := tb.want[addr]
				if old, ok := tb.x.Remove(addr); ok != wok || ok && old != w {
					t.Fatalf("step %d: remove(%#x) = %d, %v; want %d, %v", step, addr, old, ok, w, wok)
				}
				delete(tb.want, addr)
			}
		case k < 9: // put one, often where a block was just freed
			addr := page + uint64(r.Intn(idxPageSlots))*8
			w, wok := tb.want[addr]
			if old, ok := tb.x.Put(addr, v); ok != wok || ok && old != w {
				t.Fatalf("step %d: put(%#x) = %d, %v; want %d, %v", step, addr, old, ok, w, wok)
			}
			tb.want[addr] = v
		case k < 10: // a run
			addr := page + uint64(r.Intn(idxPageSlots))*8
			var addrs []uint64
			var vals []uint32
			for i := range 2 + r.Intn(20) {
				addrs = append(addrs, addr)
				vals = append(vals, v+uint32(i)<<20)
				addr += uint64(1+r.Intn(3)) * 8
			}
			tb.x.PutAll(addrs, vals, nil)
			for i, a := range addrs {
				tb.want[a] = vals[i]
			}
		case k < 11: // empty the page
			for i := range uint64(idxPageSlots) {
				tb.x.Remove(page + i*8)
				delete(tb.want, page+i*8)
			}
		default:
			if len(tables) < 4 {
				tables = append(tables, &table{x: tb.x.Clone(), want: maps.Clone(tb.want)})
			}
		}
		for i, tb := range tables {
			check(step, fmt.Sprintf("table %d", i), tb)
		}
	}
}
