package record_test

import (
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestLeakStaleWords records testdata/stale.c, which leaves stale words
// pointing to a lost list where the program never wrote them: in a block
// made in freed memory, whether by malloc or as the tail realloc added to
// a block, or on the stack below main, where the agent runs at exit. The
// list is lost for memcheck, and must be for memtrail.
func TestLeakStaleWords(t *testing.T) {
	prog := fixture.Build(t, src("stale.c"))
	for _, how := range []string{"malloc", "realloc", "stack"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			rec := recordArgs(t, "", prog, how)
			if how != "stack" && !strings.Contains(rec.stderr, "reused") {
				t.Fatalf("the kept block does not have the freed block's address, so the test means nothing; stderr %q", rec.stderr)
			}
			want := fixture.Valgrind(t, prog, how)
			scans := leakScans(t, rec.res.Path)
			if len(scans) != 1 || len(want) != 1 {
				t.Fatalf("%d scans, valgrind saw %d processes", len(scans), len(want))
			}
			if scans[1].Error != "" {
				t.Fatalf("no scan: %s", scans[1].Error)
			}
			if got := classesOf(scans[1]); got != want[0].Leaks {
				t.Errorf("memtrail's classes %+v, valgrind's %+v", got, want[0].Leaks)
			}
		})
	}
}
