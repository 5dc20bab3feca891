package record_test

import (
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// leakCases are the ways testdata/leaks.c leaves blocks at exit, with the
// classes memcheck (valgrind 3.19, --leak-check=full) gives them.
var leakCases = []struct {
	how  string
	want fixture.LeakSummary
}{
	{"none", fixture.LeakSummary{}},
	{"list", fixture.LeakSummary{DefinitelyLostBytes: 40, DefinitelyLostBlocks: 1, IndirectlyLostBytes: 120, IndirectlyLostBlocks: 3}},
	{"cycle", fixture.LeakSummary{DefinitelyLostBytes: 48, DefinitelyLostBlocks: 1, IndirectlyLostBytes: 56, IndirectlyLostBlocks: 1}},
	{"global", fixture.LeakSummary{StillReachableBytes: 136, StillReachableBlocks: 2}},
	{"interior", fixture.LeakSummary{PossiblyLostBytes: 188, PossiblyLostBlocks: 2}},
	{"stack", fixture.LeakSummary{StillReachableBytes: 272, StillReachableBlocks: 2}},
	{"tree", fixture.LeakSummary{StillReachableBytes: 336, StillReachableBlocks: 5}},
	{"mix", fixture.LeakSummary{DefinitelyLostBytes: 240, DefinitelyLostBlocks: 3, IndirectlyLostBytes: 176,
		IndirectlyLostBlocks: 4, PossiblyLostBytes: 188, PossiblyLostBlocks: 2, StillReachableBytes: 616,
		StillReachableBlocks: 8}},
}

// TestLeakFixturesUnderValgrind checks the oracle: fixture.Valgrind reads
// memcheck's LEAK SUMMARY of each way leaks.c leaves its blocks as the
// fixture means them.
func TestLeakFixturesUnderValgrind(t *testing.T) {
	prog := fixture.Build(t, src("leaks.c"))
	for _, c := range leakCases {
		t.Run(c.how, func(t *testing.T) {
			t.Parallel()
			got := fixture.Valgrind(t, prog, c.how)
			if len(got) != 1 {
				t.Fatalf("valgrind saw %d processes", len(got))
			}
			if got[0].Leaks != c.want {
				t.Errorf("memcheck's leak summary %+v, want %+v", got[0].Leaks, c.want)
			}
		})
	}
}
