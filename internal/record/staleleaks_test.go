package record_test

import (
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestLeakStaleWords records testdata/stale.c, which keeps a block made in
// freed memory and never written, whose stale words point to a list the
// freed block held: the list is lost for memcheck, and must be for
// memtrail, whether the block came from malloc or from the tail realloc
// added to a block.
func TestLeakStaleWords(t *testing.T) {
	prog := fixture.Build(t, src("stale.c"))
	for _, how := range []string{"malloc", "realloc"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			rec := recordArgs(t, "", prog, how)
			if !strings.Contains(rec.stderr, "reused") {
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
