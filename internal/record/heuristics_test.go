package record_test

import (
	"os/exec"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// heuristicCases are the ways testdata/heuristics.cc keeps blocks through
// pointers into their interiors, with the lost classes and the blocks
// found via each heuristic that memcheck (valgrind 3.19, whose
// --leak-check-heuristics is all by default) gives them. Still reachable
// is left out here: it holds libstdc++'s emergency exception pool, whose
// size is the library's.
var heuristicCases = []struct {
	how  string
	lost fixture.LeakSummary // without still reachable
	via  fixture.ViaHeuristic
}{
	{"newarray", fixture.LeakSummary{}, fixture.ViaHeuristic{NewArray: fixture.Reach{Bytes: 104, Blocks: 1}}},
	{"multipleinheritance", fixture.LeakSummary{}, fixture.ViaHeuristic{MultipleInheritance: fixture.Reach{Bytes: 40, Blocks: 1}}},
	{"length64", fixture.LeakSummary{}, fixture.ViaHeuristic{Length64: fixture.Reach{Bytes: 64, Blocks: 1}}},
	{"stdstring", fixture.LeakSummary{}, fixture.ViaHeuristic{StdString: fixture.Reach{Bytes: 55, Blocks: 1}}},
	{"nomatch", fixture.LeakSummary{PossiblyLostBytes: 112, PossiblyLostBlocks: 2}, fixture.ViaHeuristic{}},
	// The array is possibly lost, and memcheck counts it via newarray all
	// the same.
	{"fromlost", fixture.LeakSummary{DefinitelyLostBytes: 136, DefinitelyLostBlocks: 1, IndirectlyLostBytes: 40,
		IndirectlyLostBlocks: 1, PossiblyLostBytes: 192, PossiblyLostBlocks: 2},
		fixture.ViaHeuristic{NewArray: fixture.Reach{Bytes: 72, Blocks: 1}}},
	{"all", fixture.LeakSummary{DefinitelyLostBytes: 136, DefinitelyLostBlocks: 1, IndirectlyLostBytes: 40,
		IndirectlyLostBlocks: 1, PossiblyLostBytes: 304, PossiblyLostBlocks: 4},
		fixture.ViaHeuristic{StdString: fixture.Reach{Bytes: 55, Blocks: 1}, Length64: fixture.Reach{Bytes: 64, Blocks: 1},
			NewArray: fixture.Reach{Bytes: 176, Blocks: 2}, MultipleInheritance: fixture.Reach{Bytes: 40, Blocks: 1}}},
}

// buildHeuristics builds heuristics.cc and says whether its strings are
// copy-on-write ones (libstdc++'s old ABI), which the stdstring heuristic
// is about.
func buildHeuristics(t *testing.T) (prog string, cow bool) {
	prog = fixture.Build(t, src("heuristics.cc"))
	return prog, exec.Command(prog, "cow").Run() == nil
}

// TestHeuristicFixturesUnderValgrind checks the oracle: memcheck finds
// each block of heuristics.cc through the heuristic the fixture means,
// and through none where it means none.
func TestHeuristicFixturesUnderValgrind(t *testing.T) {
	prog, cow := buildHeuristics(t)
	for _, c := range heuristicCases {
		t.Run(c.how, func(t *testing.T) {
			if !cow && (c.how == "stdstring" || c.how == "all") {
				t.Skip("this g++ has no copy-on-write strings (-D_GLIBCXX_USE_CXX11_ABI=0)")
			}
			t.Parallel()
			got := fixture.Valgrind(t, prog, c.how)
			if len(got) != 1 {
				t.Fatalf("valgrind saw %d processes", len(got))
			}
			lost := got[0].Leaks
			lost.StillReachableBytes, lost.StillReachableBlocks = 0, 0
			if lost != c.lost || got[0].ViaHeuristic != c.via {
				t.Errorf("memcheck: lost %+v via %+v, want lost %+v via %+v", lost, got[0].ViaHeuristic, c.lost, c.via)
			}
		})
	}
}

// TestHeuristicClassesEqualValgrind records each way heuristics.cc keeps
// its blocks and compares the classes of the recorder's scan with
// memcheck's, bytes and blocks: the blocks a heuristic accepts are still
// reachable in both, the others possibly lost (or lost).
func TestHeuristicClassesEqualValgrind(t *testing.T) {
	prog, _ := buildHeuristics(t)
	for _, c := range heuristicCases {
		t.Run(c.how, func(t *testing.T) {
			t.Parallel()
			classesEqualValgrind(t, prog, c.how)
		})
	}
}
