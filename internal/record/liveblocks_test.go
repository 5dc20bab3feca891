package record

import (
	"maps"
	"math/rand"
	"slices"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
)

// TestBlockTableModel checks the block table and its index against a Go
// map, through puts (new blocks and blocks replaced), removes and finds of
// blocks that do not overlap, from 0 bytes to more than 4 GiB, in a few
// pages and spread over 64 MiB, at addresses 16-byte, 8-byte and not
// 8-byte aligned. After every few thousand changes, the index must number
// the blocks in address order and find, for any address, the block that
// holds it, as a search of every block does, and give the block of any
// number.
func TestBlockTableModel(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	const base = 0x5555_0000_0000
	var tb blockTable
	want := map[uint64]uint64{}
	overlaps := func(a, size uint64) bool {
		for b, s := range want {
			if b != a && a < b+max(s, 1) && b < a+max(size, 1) {
				return true
			}
		}
		return false
	}
	randAddr := func() uint64 {
		var a uint64
		if r.Intn(2) == 0 {
			a = base + uint64(r.Intn(3*pageSize))&^15 // a few pages, crowded
		} else {
			a = base + uint64(r.Intn(64<<20))&^15
		}
		switch r.Intn(8) {
		case 0:
			a += 8
		case 1:
			a += 1 + uint64(r.Intn(7))
		}
		return a
	}
	randSize := func() uint64 {
		switch r.Intn(20) {
		case 0:
			return bigBlock - 1 + uint64(r.Intn(3))
		case 1:
			return pageSize - 8 + uint64(r.Intn(3*pageSize))
		case 2:
			return 5 << 30
		case 3:
			return 0
		}
		return uint64(1 + r.Intn(120))
	}
	check := func(step int) {
		t.Helper()
		ix := newBlockIndex(&tb)
		if ix.count() != len(want) || tb.len() != len(want) {
			t.Fatalf("step %d: %d blocks numbered, %d in the table, want %d", step, ix.count(), tb.len(), len(want))
		}
		var addrs []uint64
		nums := map[uint32]uint64{}
		ix.each(0, ^uint64(0), func(num uint32, a, size uint64) {
			addrs = append(addrs, a)
			if size != want[a] {
				t.Fatalf("step %d: block %#x of %d bytes, want %d", step, a, size, want[a])
			}
			if _, dup := nums[num]; dup || int(num) >= len(want) {
				t.Fatalf("step %d: block %#x numbered %d twice or past the count", step, a, num)
			}
			nums[num] = a
		})
		sorted := slices.Sorted(maps.Keys(want))
		if !slices.Equal(addrs, sorted) {
			t.Fatalf("step %d: blocks out of order or missing", step)
		}
		for num, a := range nums {
			if got, size := ix.block(num); got != a || size != want[a] {
				t.Fatalf("step %d: block(%d) = %#x, %d bytes; want %#x, %d", step, num, got, size, a, want[a])
			}
		}
		for range 3000 {
			v := randAddr() + uint64(r.Intn(64))
			if len(sorted) > 0 && r.Intn(2) == 0 { // near or in a block
				a := sorted[r.Intn(len(sorted))]
				v = a + uint64(r.Intn(int(min(want[a], 1<<20))+16))
			}
			var wantAddr uint64
			found := false
			for a, s := range want {
				if holds(a, s, v) {
					wantAddr, found = a, true
				}
			}
			num, start, size, ok := ix.find(v)
			if ok != found || ok && (start != wantAddr || size != want[start] || nums[num] != start) {
				t.Fatalf("step %d: find(%#x) = block %d at %#x, %d bytes, %v; want %#x, %v", step, v, num, start, size, ok, wantAddr, found)
			}
		}
		sub := sorted[len(sorted)/3:]
		lo, hi := sub[0], sub[len(sub)/2]
		var in []uint64
		ix.each(lo, hi, func(_ uint32, a, _ uint64) { in = append(in, a) })
		if !slices.Equal(in, sub[:len(sub)/2]) {
			t.Fatalf("step %d: %d blocks in [%#x, %#x), want %d", step, len(in), lo, hi, len(sub)/2)
		}
	}
	for step := range 40_000 {
		a := randAddr()
		switch r.Intn(5) {
		case 0, 1, 2:
			size := randSize()
			if overlaps(a, size) {
				continue
			}
			old, had := tb.put(a, size)
			if wantOld, wantHad := want[a]; had != (wantHad || false) || had && old != wantOld {
				t.Fatalf("step %d: putChecked(t, %#x) found %d, %v; want %d, %v", step, a, old, had, wantOld, wantHad)
			}
			want[a] = size
		case 3:
			if len(want) > 0 && r.Intn(2) == 0 {
				for a = range want {
					break
				}
			}
			size, had := tb.remove(a)
			wantSize, wantHad := want[a]
			if had != wantHad || size != wantSize {
				t.Fatalf("step %d: remove(%#x) = %d, %v; want %d, %v", step, a, size, had, wantSize, wantHad)
			}
			delete(want, a)
		case 4:
			size, had := tb.find(a)
			wantSize, wantHad := want[a]
			if had != wantHad || size != wantSize {
				t.Fatalf("step %d: find(%#x) = %d, %v; want %d, %v", step, a, size, had, wantSize, wantHad)
			}
		}
		if step%4000 == 3999 {
			check(step)
		}
	}
	for a := range want { // and empty again
		tb.remove(a)
	}
	if tb.len() != 0 || len(tb.dir) != 0 || len(tb.freePages) != int(tb.npages) {
		t.Fatalf("emptied: %d blocks, %d chunks, %d of %d pages free", tb.len(), len(tb.dir), len(tb.freePages), tb.npages)
	}
	if _, _, _, ok := newBlockIndex(&tb).find(base); ok {
		t.Fatalf("emptied: find found a block")
	}
}

// TestBlockTableDeadPlaces checks the places that removes leave in a
// page until it is compacted: a block put back at a removed one's address
// takes its place, a block put between them shifts them, finds and
// removes pass over them, a fork child's copy shares them until either
// side changes the page, a page compacts once half of its places are dead
// and a leak scan's index numbers the blocks as if none had ever been.
func TestBlockTableDeadPlaces(t *testing.T) {
	const base = 0x10000
	var tb blockTable
	want := map[uint64]uint64{}
	remove := func(tb *blockTable, want map[uint64]uint64, a uint64) {
		t.Helper()
		if size, had := tb.remove(a); size != want[a] || had != (want[a] != 0) {
			t.Fatalf("remove(%#x) = %d, %v; want %d", a, size, had, want[a])
		}
		delete(want, a)
	}
	check := func(tb *blockTable, want map[uint64]uint64, what string) {
		t.Helper()
		if tb.len() != len(want) {
			t.Fatalf("%s: %d blocks, want %d", what, tb.len(), len(want))
		}
		for a := uint64(base); a < base+2*pageSize; a += 8 {
			if size, ok := tb.find(a); size != want[a] || ok != (want[a] != 0) {
				t.Fatalf("%s: find(%#x) = %d, %v; want %d", what, a, size, ok, want[a])
			}
		}
		sorted := slices.Sorted(maps.Keys(want))
		ix := newBlockIndex(tb)
		if ix.count() != len(want) {
			t.Fatalf("%s: %d blocks numbered, want %d", what, ix.count(), len(want))
		}
		ix.each(0, ^uint64(0), func(num uint32, a, size uint64) {
			if int(num) >= len(sorted) || sorted[num] != a || size != want[a] {
				t.Fatalf("%s: block %d at %#x of %d bytes, want %#x", what, num, a, size, sorted[min(int(num), len(sorted)-1)])
			}
			if n, start, _, ok := ix.find(a + size/2); !ok || n != num || start != a {
				t.Fatalf("%s: find(%#x) = block %d at %#x, %v; want %d", what, a+size/2, n, start, ok, num)
			}
		})
	}
	for i := range uint64(100) {
		putChecked(t, &tb, want, base+16*i, 1+i%16)
	}
	putChecked(t, &tb, want, base+16*99, 70000) // in the big map
	pg, _ := tb.findPage(base >> tablePageBits)
	for i := uint64(10); i < 42; i += 2 {
		remove(&tb, want, base+16*i)
	}
	remove(&tb, want, base+16*99)
	if pg.dead != 17 || len(pg.sizes) != 100 || len(tb.big) != 0 {
		t.Fatalf("after 17 removes: %d dead places of %d, %d big blocks", pg.dead, len(pg.sizes), len(tb.big))
	}
	if _, had := tb.remove(base + 16*12); had {
		t.Fatalf("a block removed twice")
	}
	putChecked(t, &tb, want, base+16*12, 7)     // back in its place
	putChecked(t, &tb, want, base+16*20+8, 3)   // between dead places
	putChecked(t, &tb, want, base+16*99, 80000) // back, big again
	if pg.dead != 15 || len(pg.sizes) != 101 {
		t.Fatalf("after putting back: %d dead places of %d", pg.dead, len(pg.sizes))
	}

	// A fork child's copy: neither side sees the other's changes.
	child := tb.clone()
	childWant := maps.Clone(want)
	remove(child, childWant, base+16*1)
	putChecked(t, child, childWant, base+16*14, 5)
	putChecked(t, &tb, want, base+16*16, 9)
	check(child, childWant, "child")

	for _, a := range slices.Sorted(maps.Keys(want)) {
		if remove(&tb, want, a); pg.dead == 0 {
			break
		}
	}
	if pg.dead != 0 || len(pg.sizes) != tb.len() {
		t.Fatalf("not compacted: %d dead places, %d places for %d blocks", pg.dead, len(pg.sizes), tb.len())
	}
	check(&tb, want, "compacted")

	remove(&tb, want, base+16*2) // a dead place again, for the index to compact
	check(&tb, want, "parent")
}

// TestBlockTableCarved checks put's path for a block carved after the
// latest one carved in its page against a Go map: an allocator carving
// pages of small blocks, freeing some, handing freed ones out again among
// the new ones, going back to an earlier page, emptying a page (which is
// then made again from nothing) and carving a fork child's copy, whose
// pages are shared. Each put must find what the map has, and every find
// and the index must agree with it.
func TestBlockTableCarved(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	const base = 0x5555_0000_0000
	var tb blockTable
	want := map[uint64]uint64{}
	check := func(tb *blockTable, want map[uint64]uint64, end uint64, what string) {
		t.Helper()
		if tb.len() != len(want) {
			t.Fatalf("%s: %d blocks, want %d", what, tb.len(), len(want))
		}
		for a := uint64(base); a < end; a += 8 {
			if size, ok := tb.find(a); size != want[a] || ok != (want[a] != 0) {
				t.Fatalf("%s: find(%#x) = %d, %v; want %d", what, a, size, ok, want[a])
			}
		}
		ix := newBlockIndex(tb)
		sorted := slices.Sorted(maps.Keys(want))
		if ix.count() != len(want) {
			t.Fatalf("%s: %d blocks numbered, want %d", what, ix.count(), len(want))
		}
		ix.each(0, ^uint64(0), func(num uint32, a, size uint64) {
			if sorted[num] != a || size != want[a] {
				t.Fatalf("%s: block %d at %#x of %d bytes, want %#x", what, num, a, size, sorted[num])
			}
		})
	}
	// Two arenas, as two threads' are, carved in turns: the latest block
	// carved is then often in another page than the one found last.
	const arenaB = base + 1<<20
	next := [2]uint64{base, arenaB}
	var freed []uint64
	free := func(a uint64) {
		t.Helper()
		if _, had := tb.remove(a); !had {
			t.Fatalf("remove(%#x) found nothing", a)
		}
		delete(want, a)
		freed = append(freed, a)
	}
	latest := uint64(0)
	for i := 0; i < 20000; i++ {
		arena := r.Intn(2)
		start := uint64(base)
		if arena == 1 {
			start = arenaB
		}
		switch k := r.Intn(20); {
		case k == 0 && len(freed) > 0: // a freed block handed out again
			j := r.Intn(len(freed))
			putChecked(t, &tb, want, freed[j], uint64(1+r.Intn(40)))
			freed = slices.Delete(freed, j, j+1)
		case k == 1 && len(want) > 0: // a free
			for a := range want {
				free(a)
				break
			}
		case k == 2 && latest != 0: // the latest block carved, freed and handed out again
			if want[latest] != 0 {
				free(latest)
				putChecked(t, &tb, want, latest, 8)
				freed = freed[:len(freed)-1]
			}
		case k == 3: // blocks in the middle of a page, not carved
			a := start + uint64(r.Intn(int(next[arena]-start)+1))&^15
			for _, a := range []uint64{a, a + 8, a + 16, a + 32} {
				if want[a] == 0 && want[a-8] == 0 && !slices.Contains(freed, a) && a+8 < next[arena] {
					putChecked(t, &tb, want, a, 8)
				}
			}
		default: // carved after the latest block
			size := 16 + uint64(i%7)*8
			latest = next[arena]
			putChecked(t, &tb, want, latest, size)
			next[arena] += (size + 8 + 15) &^ 15
		}
	}
	check(&tb, want, next[1], "carved")
	next0 := next[1]

	// Every block of the last page out: the page goes, and carving it
	// again starts it from nothing.
	last := (next0 - 1) &^ (pageSize - 1)
	for a := range want {
		if a >= last {
			tb.remove(a)
			delete(want, a)
		}
	}
	for a := last; a < next0; a += 32 {
		putChecked(t, &tb, want, a, 20)
	}
	check(&tb, want, next0, "page made again")

	child := tb.clone()
	childWant := maps.Clone(want)
	for a := next0; a < next0+pageSize; a += 48 {
		putChecked(t, child, childWant, a, 40)
	}
	for a := last; a < next0; a += 32 {
		putChecked(t, child, childWant, a, 24) // a shared page's blocks, replaced
	}
	check(child, childWant, next0+pageSize, "child")
	check(&tb, want, next0+pageSize, "parent")
}

// TestBlockTablePageRoom checks that a page that an allocator carves one
// block after the other grows its sizes at most twice, to no more room
// than twice its blocks, and that blocks put elsewhere in a page grow it
// as they always did, doubling.
func TestBlockTablePageRoom(t *testing.T) {
	for _, spacing := range []uint64{16, 32, 48, 64, 80, 208} {
		var tb blockTable
		const base = 0x7000_0000
		growths, last := 0, 0
		n := 0
		for a := uint64(base); a+spacing <= base+pageSize; a += spacing {
			tb.put(a+8*uint64(n%2), spacing-16) // not quite evenly spaced
			n++
			if c := cap(tb.lastPg[0].sizes); c != last {
				growths, last = growths+1, c
			}
		}
		if growths > 3 || last > max(16, 2*n) { // 0 to 16, then twice
			t.Errorf("blocks %d bytes apart: %d blocks in room for %d, after %d growths", spacing, n, last, growths)
		}
	}
	var tb blockTable
	for i := range uint64(40) { // from the end of the page back
		tb.put(0x7000_0000+pageSize-16*(i+1), 8)
	}
	if c := cap(tb.lastPg[0].sizes); c != 64 {
		t.Errorf("40 blocks put from the end back: room for %d, want 64", c)
	}
}

// TestBlockIndexHeaderWord checks that a pointer to where glibc puts the
// next chunk's header, inside a block of 8 mod 16 bytes, is not taken for
// one to the block, and that any other pointer into it is.
func TestBlockIndexHeaderWord(t *testing.T) {
	var tb blockTable
	tb.put(0x10000, 24) // chunk of 32 bytes: the next header is at 0x10000+16
	ix := newBlockIndex(&tb)
	for v, want := range map[uint64]bool{0x10000: true, 0x10008: true, 0x10010: false, 0x10017: true, 0x10018: false} {
		if _, _, _, ok := ix.find(v); ok != want {
			t.Errorf("find(%#x) = %v, want %v", v, ok, want)
		}
	}
}

// BenchmarkLiveSetEvents measures what keeping the live set costs the
// recorder an event, on the events of bench/workloads/bigheap.c (blocks
// one after the other, every other one freed) and on frees in a random
// order, as a program that has held its blocks a while makes them.
func BenchmarkLiveSetEvents(b *testing.B) {
	const n = 1 << 20
	addrs := make([]uint64, n)
	a := uint64(0x5555_0000_0000)
	for i := range addrs {
		size := 16 + uint64(i*5%7)*8
		addrs[i] = a
		a += (size + 8 + 15) &^ 15
	}
	run := func(b *testing.B, frees []uint64) {
		for range b.N {
			l := newLiveSet(false)
			for i, a := range addrs {
				l.apply(&trace.Event{Kind: trace.KindAlloc, Addr: a, Size: 16 + uint64(i*5%7)*8})
			}
			for _, a := range frees {
				l.apply(&trace.Event{Kind: trace.KindFree, Addr: a})
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(n+len(frees))), "ns/event")
	}
	b.Run("bigheap", func(b *testing.B) {
		var frees []uint64
		for i := 0; i < n; i += 2 {
			frees = append(frees, addrs[i])
		}
		run(b, frees)
	})
	b.Run("random-frees", func(b *testing.B) {
		frees := slices.Clone(addrs)
		rand.New(rand.NewSource(1)).Shuffle(n, func(i, j int) { frees[i], frees[j] = frees[j], frees[i] })
		run(b, frees)
	})
}

// putChecked puts a block of size at a in tb, which must find there what
// want, the blocks it should hold, has, and notes it in want.
func putChecked(t *testing.T, tb *blockTable, want map[uint64]uint64, a, size uint64) {
	t.Helper()
	if old, had := tb.put(a, size); had != (want[a] != 0) || old != want[a] {
		t.Fatalf("putChecked(t, %#x) found %d, %v; want %d", a, old, had, want[a])
	}
	want[a] = size
}
