package record_test

import (
	"time"

	"github.com/memtrail/memtrail/internal/trace"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/record"
)

// leakCases are the ways testdata/leaks.c leaves blocks at exit, with the
// classes memcheck (valgrind 3.19, --leak-check=full) gives them.
var leakCases = []struct {
	how  string
	want fixture.LeakSummary
}{
	{"none", fixture.LeakSummary{}},
	{"list", fixture.LeakSummary{DefinitelyLostBytes: 40, DefinitelyLostBlocks: 1, IndirectlyLostBytes: 120, IndirectlyLostBlocks: 3}},
	{"threads", fixture.LeakSummary{DefinitelyLostBytes: 176, DefinitelyLostBlocks: 1, PossiblyLostBytes: 272, PossiblyLostBlocks: 1,
		StillReachableBytes: 168, StillReachableBlocks: 1}},
	{"threads_urg", fixture.LeakSummary{DefinitelyLostBytes: 176, DefinitelyLostBlocks: 1, PossiblyLostBytes: 272, PossiblyLostBlocks: 1,
		StillReachableBytes: 168, StillReachableBlocks: 1}},
	{"freed_array", fixture.LeakSummary{DefinitelyLostBytes: 7200, DefinitelyLostBlocks: 300}},
	{"freed_head", fixture.LeakSummary{DefinitelyLostBytes: 40, DefinitelyLostBlocks: 1, IndirectlyLostBytes: 80, IndirectlyLostBlocks: 2}},
	{"cycle", fixture.LeakSummary{DefinitelyLostBytes: 48, DefinitelyLostBlocks: 1, IndirectlyLostBytes: 56, IndirectlyLostBlocks: 1}},
	{"global", fixture.LeakSummary{StillReachableBytes: 136, StillReachableBlocks: 2}},
	{"interior", fixture.LeakSummary{PossiblyLostBytes: 188, PossiblyLostBlocks: 2}},
	{"stack", fixture.LeakSummary{StillReachableBytes: 272, StillReachableBlocks: 2}},
	{"tree", fixture.LeakSummary{StillReachableBytes: 336, StillReachableBlocks: 5}},
	{"windows", fixture.LeakSummary{DefinitelyLostBytes: 2 << 20, DefinitelyLostBlocks: 1, IndirectlyLostBytes: 3200, IndirectlyLostBlocks: 100,
		PossiblyLostBytes: 20000 + 64<<10, PossiblyLostBlocks: 501, StillReachableBytes: 3<<20 + 48000, StillReachableBlocks: 2001}},
	{"shuffled", fixture.LeakSummary{DefinitelyLostBytes: 64, DefinitelyLostBlocks: 2, IndirectlyLostBytes: 127936, IndirectlyLostBlocks: 3998,
		PossiblyLostBytes: 64000, PossiblyLostBlocks: 2000, StillReachableBytes: 64000, StillReachableBlocks: 2000}},
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

// leakScans reads the LeakScan records of a trace, by process.
func leakScans(t *testing.T, path string) map[uint64]trace.LeakScan {
	t.Helper()
	out := map[uint64]trace.LeakScan{}
	for _, rec := range readTrace(t, path) {
		if rec.Kind == trace.KindLeakScan {
			out[rec.LeakScan.Process] = *rec.LeakScan
		}
	}
	return out
}

func classesOf(s trace.LeakScan) fixture.LeakSummary {
	return fixture.LeakSummary{DefinitelyLostBytes: s.DefinitelyLostBytes, DefinitelyLostBlocks: s.DefinitelyLostBlocks,
		IndirectlyLostBytes: s.IndirectlyLostBytes, IndirectlyLostBlocks: s.IndirectlyLostBlocks,
		PossiblyLostBytes: s.PossiblyLostBytes, PossiblyLostBlocks: s.PossiblyLostBlocks,
		StillReachableBytes: s.StillReachableBytes, StillReachableBlocks: s.StillReachableBlocks}
}

// TestLeakClassesEqualValgrind records each way leaks.c leaves its blocks
// and compares the classes of the recorder's scan with memcheck's, bytes
// and blocks.
func TestLeakClassesEqualValgrind(t *testing.T) {
	prog := fixture.Build(t, src("leaks.c"))
	for _, c := range leakCases {
		t.Run(c.how, func(t *testing.T) {
			t.Parallel()
			classesEqualValgrind(t, prog, c.how)
		})
	}
}

// TestLeakSweepOverBudget records leaks.c's lists in random address
// order with a sweep that may keep fewer pointers than they hold: the
// sweep stops part way (or keeps none), the rest is read in batches, and
// the classes still equal memcheck's.
func TestLeakSweepOverBudget(t *testing.T) {
	prog := fixture.Build(t, src("leaks.c"))
	for _, budget := range []int{0, 3000} {
		restore := record.SetSweepBudget(budget)
		classesEqualValgrind(t, prog, "shuffled")
		restore()
	}
}

// classesEqualValgrind records prog with argument how and compares the
// classes of the recorder's scan with memcheck's, bytes and blocks.
func classesEqualValgrind(t *testing.T, prog, how string) {
	t.Helper()
	rec := recordArgs(t, "", prog, how)
	want := fixture.Valgrind(t, prog, how)
	scans := leakScans(t, rec.res.Path)
	if len(scans) != 1 || len(want) != 1 {
		t.Fatalf("%d scans, valgrind saw %d processes", len(scans), len(want))
	}
	scan := scans[1]
	if scan.Error != "" {
		t.Fatalf("no scan: %s", scan.Error)
	}
	if got := classesOf(scan); got != want[0].Leaks {
		t.Errorf("memtrail's classes %+v, valgrind's %+v (via heuristics %+v)", got, want[0].Leaks, want[0].ViaHeuristic)
	}
	t.Logf("%s: %+v in %v", how, classesOf(scan), time.Duration(scan.Duration))
}

// TestLeakMergedMapping records leaks.c keeping a block only by a pointer
// in an anonymous mapping of its own right before the mapping of a big
// block, which the kernel joins to it: the program's part is a root, and
// both blocks are still reachable. (valgrind cannot be the oracle here:
// its allocator does not map big blocks on their own.)
func TestLeakMergedMapping(t *testing.T) {
	prog := fixture.Build(t, src("leaks.c"))
	rec := recordArgs(t, "", prog, "merged")
	scans := leakScans(t, rec.res.Path)
	want := fixture.LeakSummary{StillReachableBytes: 1<<20 + 200, StillReachableBlocks: 2}
	if len(scans) != 1 || scans[1].Error != "" {
		t.Fatalf("scans %+v", scans)
	}
	if got := classesOf(scans[1]); got != want {
		t.Errorf("classes %+v, want %+v", got, want)
	}
}

// TestLeakScanSignals: in a program that handles SIGURG, the threads are
// stopped with another signal (the program's handler, which writes to
// stderr, never runs; the classes equal valgrind's in
// TestLeakClassesEqualValgrind); a thread that blocks every signal cannot
// be stopped, and the program is scanned and exits all the same.
func TestLeakScanSignals(t *testing.T) {
	prog := fixture.Build(t, src("leaks.c"))
	rec := recordArgs(t, "", prog, "threads_urg")
	if strings.Contains(rec.stderr, "SIGURG handled") {
		t.Errorf("the program's SIGURG handler ran during the scan")
	}
	rec = recordArgs(t, "", prog, "threads_masked")
	scans := leakScans(t, rec.res.Path)
	if len(scans) != 1 || scans[1].Error != "" {
		t.Fatalf("a thread that blocks every signal: scans %+v", scans)
	}
	if p := rec.model.Processes[0]; p.How != trace.EndExited || p.Code != 0 {
		t.Errorf("a thread that blocks every signal: the program ended %v, %d; want an exit with status 0", p.How, p.Code)
	}
}

// TestKilledHasNoLeakScan: a process killed by SIGKILL never reaches its
// exit handlers, and its trace has no scan to read.
func TestKilledHasNoLeakScan(t *testing.T) {
	rec := recordArgs(t, "", fixture.Build(t, src("crash.c")), "kill")
	if p := rec.model.Processes[0]; p.How != trace.EndSignaled {
		t.Fatalf("the process ended %v, want by a signal", p.How)
	}
	if scans := leakScans(t, rec.res.Path); len(scans) != 0 {
		t.Errorf("a killed process has leak scans %+v", scans)
	}
}

// TestLeakScanAfterMainThreadExit records a program whose main thread
// ends with pthread_exit before another thread calls exit: the
// thread-group leader is a zombie, without memory, when the process is
// scanned, and the scan reads it through the exiting thread. The classes
// equal valgrind's.
func TestLeakScanAfterMainThreadExit(t *testing.T) {
	classesEqualValgrind(t, fixture.Build(t, src("mainexit.c"), "-pthread"), "")
}
