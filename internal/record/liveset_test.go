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
// GiB (whose sizes do not fit the address map's values), at aligned and
// unaligned addresses, and a fork child's clone, which must not see its
// parent's later changes.
func TestLiveSetModel(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	addr := func() uint64 {
		a := 0x5555_0000_0000 + uint64(r.Intn(4096))*16
		if r.Intn(8) == 0 {
			a += 8
		}
		return a
	}
	size := func() uint64 {
		if r.Intn(16) == 0 {
			return bigSize + uint64(r.Intn(3))<<32 + uint64(r.Intn(2))
		}
		return uint64(r.Intn(600))
	}
	check := func(what string, l *liveSet, want map[uint64]uint64) {
		t.Helper()
		addrs, sizes := l.sorted()
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
	for i := range 200_000 {
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
	}
	check("parent", l, want)
	check("fork child", forked, forkedWant)
}
