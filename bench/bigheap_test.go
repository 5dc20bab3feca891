package main

import (
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestBigheapLeavesHalfReachable checks the bigheap workload with memcheck:
// built as bench builds it, it must end with half its blocks in use and
// every one still reachable, not leaked; the scan it measures is that of
// a big heap of reachable blocks.
func TestBigheapLeavesHalfReachable(t *testing.T) {
	const blocks = 1000
	prog := fixture.Build(t, "workloads/bigheap.c", "-O2", "-g")
	sums := fixture.Valgrind(t, prog, "1000")
	if len(sums) != 1 {
		t.Fatalf("valgrind reported %d processes, want 1", len(sums))
	}
	s := sums[0]
	// The workload's blocks, its array of them, and stdout's buffer.
	const live = blocks/2 + 2
	if s.Allocs != blocks+2 || s.Frees != blocks/2 {
		t.Errorf("%d allocations and %d frees, want %d and %d", s.Allocs, s.Frees, blocks+2, blocks/2)
	}
	leaks := s.Leaks
	if leaks.StillReachableBlocks != live || leaks.DefinitelyLostBlocks+leaks.IndirectlyLostBlocks+leaks.PossiblyLostBlocks != 0 {
		t.Errorf("at exit: %+v; want %d blocks still reachable and none lost", leaks, live)
	}
}

// TestBigheapBlocksBound refuses a block count out of bounds before it
// builds anything.
func TestBigheapBlocksBound(t *testing.T) {
	defer func(n, s int64) { bigheapBlocks, scaleBlocks = n, s }(bigheapBlocks, scaleBlocks)
	for _, flag := range []struct {
		name   string
		blocks *int64
	}{{"-bigheap-blocks", &bigheapBlocks}, {"-scale-blocks", &scaleBlocks}} {
		for _, n := range []int64{-1, 1, 1<<30 + 1} {
			bigheapBlocks, scaleBlocks = 1000, 1000
			*flag.blocks = n
			err := run(1, "bigheap", modes{scale: flag.name == "-scale-blocks"})
			if err == nil || !strings.Contains(err.Error(), flag.name) {
				t.Errorf("%s %d: error %v, want one naming %s", flag.name, n, err, flag.name)
			}
		}
	}
}

// TestAllAloneRefused refuses -all with a mode it already includes
// before it builds anything.
func TestAllAloneRefused(t *testing.T) {
	for _, m := range []modes{{all: true, reading: true}, {all: true, web: true}, {all: true, scale: true}, {all: true, pgo: true}} {
		err := run(1, "", m)
		if err == nil || !strings.Contains(err.Error(), "-all") {
			t.Errorf("%+v: error %v, want one naming -all", m, err)
		}
	}
}

// TestScaleOnlyBigheap refuses -scale with other workloads before it
// builds anything.
func TestScaleOnlyBigheap(t *testing.T) {
	err := run(1, "dense", modes{scale: true})
	if err == nil || !strings.Contains(err.Error(), "-scale") {
		t.Errorf("-scale -only dense: error %v, want one naming -scale", err)
	}
}
