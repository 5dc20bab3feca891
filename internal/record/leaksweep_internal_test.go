package record

import (
	"maps"
	"math/rand"
	"os"
	"slices"
	"testing"
	"unsafe"
)

// TestSweepMarksAsPlainSearch marks random graphs of blocks laid out in
// this test's own memory (read as another process's would be) with
// batches only, with a sweep from the start, and with sweeps that stop
// part way for want of budget, and compares each block's state with a
// plain search over a Go map of the blocks: start and interior pointers,
// from roots and from possibly lost blocks, cycles, blocks pointing at
// themselves.
func TestSweepMarksAsPlainSearch(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	ms, err := readMaps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer func(old func(int) int) { sweepBudget = old }(sweepBudget)
	for round := range 20 {
		nblocks := 1 + r.Intn(3000)
		// The blocks, in random order of address, sizes a multiple of 16
		// (so that no pointer falls on glibc's next chunk header, see
		// holds) with gaps between some.
		arena := make([]uint64, nblocks*20)
		base := uint64(uintptr(unsafe.Pointer(&arena[0])))
		addrs, sizes := make([]uint64, nblocks), make([]uint64, nblocks)
		at := uint64(0)
		for i := range nblocks {
			at += uint64(r.Intn(2)) * 16
			addrs[i], sizes[i] = base+at, 16*uint64(2+r.Intn(6))
			at += sizes[i]
		}
		r.Shuffle(nblocks, func(i, j int) { addrs[i], addrs[j], sizes[i], sizes[j] = addrs[j], addrs[i], sizes[j], sizes[i] })
		// pointer returns a pointer to block k's start or, at 16 bytes in,
		// its interior: offsets no heuristic takes for a start.
		pointer := func(k int) uint64 {
			if r.Intn(4) == 0 {
				return addrs[k] + 16
			}
			return addrs[k]
		}
		for k := range nblocks {
			for w := uint64(0); w < sizes[k]/8; w++ {
				var v uint64
				switch r.Intn(6) {
				case 0, 1:
					if k+1 < nblocks {
						v = pointer(k + 1) // a list in random address order
					}
				case 2:
					v = pointer(r.Intn(nblocks))
				case 3:
					v = base + uint64(r.Intn(len(arena)*8)) // anywhere, between blocks too
				}
				arena[(addrs[k]-base)/8+w] = v
			}
		}
		roots := []uint64{pointer(0)}
		for range r.Intn(4) {
			roots = append(roots, pointer(r.Intn(nblocks)))
		}
		want := plainMark(addrs, sizes, roots, func(a uint64) uint64 { return arena[(a-base)/8] })

		var tb blockTable
		for k := range nblocks {
			tb.put(addrs[k], sizes[k])
		}
		ix := newBlockIndex(&tb)
		for _, way := range []struct {
			name   string
			sweep  bool
			budget int
		}{{"batches", false, 0}, {"sweep", true, 1 << 30}, {"sweep over budget", true, r.Intn(nblocks)}, {"sweep of nothing", true, 0}} {
			sweepBudget = func(int) int { return way.budget }
			m := markFrom(os.Getpid(), ix, ms, roots, way.sweep)
			if m.err != nil {
				t.Fatalf("round %d, %s: %v", round, way.name, m.err)
			}
			if way.sweep && m.graph == nil {
				t.Fatalf("round %d, %s: no sweep", round, way.name)
			}
			for k, a := range addrs {
				num, _, _, _ := ix.find(a)
				if m.state[num] != want[a] {
					t.Fatalf("round %d, %s: block %d of %d at %#x: state %d, want %d", round, way.name, k, nblocks, a, m.state[num], want[a])
				}
			}
		}
		arena[0] = 0 // arena lives until here
	}
}

// plainMark marks the blocks at addrs (of sizes) from pointers roots as
// memcheck does, reading the word at an address with word, and returns
// each block's state by address.
func plainMark(addrs, sizes []uint64, roots []uint64, word func(uint64) uint64) map[uint64]uint8 {
	size := map[uint64]uint64{}
	state := map[uint64]uint8{}
	for k, a := range addrs {
		size[a], state[a] = sizes[k], unreached
	}
	sorted := slices.Sorted(maps.Keys(size))
	holder := func(v uint64) (uint64, bool) {
		i, found := slices.BinarySearch(sorted, v)
		if !found {
			i--
		}
		if i < 0 || v >= sorted[i]+size[sorted[i]] {
			return 0, false
		}
		return sorted[i], true
	}
	var stack []uint64
	raise := func(v uint64, definite bool) {
		a, ok := holder(v)
		if !ok {
			return
		}
		switch st := state[a]; {
		case st == reachable:
			return
		case v == a && definite:
			state[a] = reachable
		case st == unreached:
			state[a] = possible
		default:
			return
		}
		stack = append(stack, a)
	}
	for _, v := range roots {
		raise(v, true)
	}
	for len(stack) > 0 {
		a := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		definite := state[a] != possible
		for w := a; w < a+size[a]; w += 8 {
			raise(word(w), definite)
		}
	}
	return state
}

// markFrom marks the blocks of ix reachable from roots in process pid's
// memory, as the scan at exit does, with the sweep made at once (its
// count of small batches set past any threshold) or never.
func markFrom(pid int, ix *blockIndex, ms []mapping, roots []uint64, sweep bool) *marker {
	m := newMarker(pid, ix, ms)
	m.noSweep = !sweep
	if sweep {
		m.smallReads = 1 << 40
	}
	for _, v := range roots {
		m.note(v, true)
	}
	m.resolveInner()
	m.drain()
	return m
}
