package record

import (
	"maps"
	"math/rand"
	"slices"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
)

// TestLiveSetModel checks the live set against a map, through
// allocations, frees and reallocs of blocks from 0 bytes to more than 4
// GiB (around the greatest size a page holds itself), at addresses
// 16-byte, 8-byte and not even 8-byte aligned, and a fork child's clone,
// which must not see its parent's later changes nor change its parent.
func TestLiveSetModel(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	addr := func() uint64 {
		a := 0x5555_0000_0000 + uint64(r.Intn(4096))*16
		switch r.Intn(16) {
		case 0, 1:
			a += 8
		case 2:
			a += 3
		}
		return a
	}
	size := func() uint64 {
		if r.Intn(16) == 0 {
			return bigBlock - 1 + uint64(r.Intn(3))<<32 + uint64(r.Intn(3))
		}
		return uint64(r.Intn(600))
	}
	check := func(what string, l *liveSet, want map[uint64]uint64) {
		t.Helper()
		var addrs, sizes []uint64
		l.blocks.each(func(a, s uint64) { addrs, sizes = append(addrs, a), append(sizes, s) })
		if !slices.Equal(addrs, slices.Sorted(maps.Keys(want))) {
			t.Fatalf("%s: %d blocks, want %d (or other addresses)", what, len(addrs), len(want))
		}
		for i, a := range addrs {
			if sizes[i] != want[a] {
				t.Fatalf("%s: block %#x has size %d, want %d", what, a, sizes[i], want[a])
			}
		}
	}
	l, want := &liveSet{}, map[uint64]uint64{}
	var forked *liveSet
	var forkedWant map[uint64]uint64
	for i := range 300_000 {
		ev := trace.Event{Addr: addr(), Size: size()}
		switch r.Intn(3) {
		case 0:
			ev.Kind = trace.KindAlloc
			want[ev.Addr] = ev.Size
		case 1:
			ev.Kind = trace.KindFree
			delete(want, ev.Addr)
		case 2:
			ev.Kind, ev.OldAddr = trace.KindRealloc, addr()
			delete(want, ev.OldAddr)
			want[ev.Addr] = ev.Size
		}
		l.apply(&ev)
		if got, ok := l.size(ev.Addr); ok != (ev.Kind != trace.KindFree) || ok && got != ev.Size {
			t.Fatalf("event %d (%v of %#x, %d bytes): size %d, %v", i, ev.Kind, ev.Addr, ev.Size, got, ok)
		}
		if i == 100_000 {
			forked, forkedWant = l.clone(), maps.Clone(want)
		}
		if i > 100_000 && i < 200_000 { // the child changes its heap too
			ev.Addr = addr()
			forked.remove(ev.Addr)
			delete(forkedWant, ev.Addr)
			forked.add(ev.Addr+16, 40)
			forkedWant[ev.Addr+16] = 40
		}
	}
	check("parent", l, want)
	check("fork child", forked, forkedWant)
}
