package record_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/record"
	"github.com/memtrail/memtrail/internal/report"
	"github.com/memtrail/memtrail/internal/trace"
)

// TestOwnAllocator records a program that defines malloc, free, calloc
// and realloc itself, and forks, told to leave its allocator alone (as
// memtrail run -patch-own-allocator=false does): the recorder warns once
// for each of its processes, naming it and the functions, and the trace
// says it too.
func TestOwnAllocator(t *testing.T) {
	prog := fixture.Build(t, src("ownmalloc.c"))
	checkNotRecorded(t, recordWith(t, "", leaveOwn, prog, "fork"), prog,
		"the program defines malloc, free, calloc and realloc itself: "+
			"calls to them do not pass through memtrail and are not recorded "+
			"(memtrail run -patch-own-allocator=false left them alone)")
}

// TestImportedAllocatorAddress records a program that takes the
// addresses of the malloc and free it imports, so that their names stand
// for its own PLT entries (as gcc's cc1 does for free): it defines neither,
// is not warned about, and its allocations are recorded.
func TestImportedAllocatorAddress(t *testing.T) {
	prog := fixture.Build(t, src("importaddr.c"), "-O2", "-fno-pic", "-no-pie")
	rec := recordArgs(t, "", prog)
	if strings.Contains(rec.stderr, "defines") {
		t.Errorf("the recorder warned of an allocator the program does not define:\n%s", rec.stderr)
	}
	p := rec.model.Processes[0]
	if len(p.NotRecorded) != 0 || p.Summary.Allocations < 10 || p.Summary.Frees < 10 {
		t.Errorf("not recorded %q, %d allocations and %d frees, want none and at least 10 of each",
			p.NotRecorded, p.Summary.Allocations, p.Summary.Frees)
	}
}

// TestOwnAllocatorRefused records, patching as by default, a program
// whose malloc has an instruction the agent does not move: none of its
// functions is patched (a block seen allocated and not freed, or the
// reverse, would be a false leak or an invalid free), and the recorder
// warns as without patching, saying it could not patch them.
func TestOwnAllocatorRefused(t *testing.T) {
	prog := fixture.Build(t, src("ownmalloc.c"), "-g", "-O2", "-DREFUSED")
	checkNotRecorded(t, recordArgs(t, "", prog, "fork"), prog,
		"the program defines malloc, free, calloc and realloc itself, in a way memtrail cannot patch: "+
			"calls to them do not pass through memtrail and are not recorded")
}

func leaveOwn(o *record.Options) { o.LeaveOwnAllocator = true }

// checkNotRecorded checks that the recorder said what, once for each
// process of rec (a program and its fork child), and wrote it in the
// trace, and that no allocation was recorded.
func checkNotRecorded(t *testing.T, rec recording, prog, what string) {
	t.Helper()
	ps := rec.model.Processes
	if len(ps) != 2 {
		t.Fatalf("%d processes, want 2", len(ps))
	}
	for _, p := range ps {
		line := fmt.Sprintf("memtrail: process %d (%s): %s\n", p.PID, prog, what)
		if n := strings.Count(rec.stderr, line); n != 1 {
			t.Errorf("the recorder said %d times %q; it said:\n%s", n, line, rec.stderr)
		}
		if len(p.NotRecorded) != 1 || p.NotRecorded[0] != what {
			t.Errorf("pid %d: the trace says %q is not recorded, want %q", p.PID, p.NotRecorded, what)
		}
		if p.Summary.Allocations != 0 || p.Summary.Frees != 0 {
			t.Errorf("pid %d: %d allocations and %d frees recorded, want none", p.PID, p.Summary.Allocations, p.Summary.Frees)
		}
	}
	if n := strings.Count(rec.stderr, "defines"); n != len(ps) {
		t.Errorf("the recorder warned %d times, want once for each process:\n%s", n, rec.stderr)
	}
	var warnings []trace.Warning
	for _, r := range readTrace(t, rec.res.Path) {
		if r.Kind == trace.KindWarning {
			warnings = append(warnings, *r.Warning)
		}
	}
	if len(warnings) != 2 || warnings[0].Process == warnings[1].Process {
		t.Errorf("warnings in the trace: %+v, want one for each process", warnings)
	}
}

// TestOwnAllocatorPatched records, patching as by default, the program
// of TestOwnAllocator built so that its functions start with a frame
// (-O0), are a tail jump to glibc's (-O2), or begin as chromium's do
// (PROLOGUES, see the fixture). The agent patches their entries: in each
// process every allocation, the program's own and libc's on its behalf,
// is recorded once, as valgrind counts them, with no event lost (its
// calloc calls its own malloc), no problem, and only the warning that it
// was patched.
func TestOwnAllocatorPatched(t *testing.T) {
	for _, flags := range [][]string{{"-O0"}, {"-O2"}, {"-O2", "-DPROLOGUES"}, {"-O2", "-DCONDJUMP"}} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			t.Parallel()
			prog := fixture.Build(t, src("ownmalloc.c"), append([]string{"-g"}, flags...)...)
			checkPatched(t, prog, "fork")
		})
	}
}

// TestOwnOperators records, patching as by default, a C++ program whose
// free is also its operator delete and delete[], whose operator new is
// also new[], and whose operator new throws once: every allocation and
// release the program counts is recorded, with no mismatched free. One
// exception: the exception object, which libstdc++ allocates inside the
// throwing operator new, where the agent takes calls to malloc for the
// allocator's own (as a calloc that calls malloc makes), is not recorded,
// and its release is an uncertain free, as in any process recorded
// through a patched allocator. After the throw the thread records as
// before.
func TestOwnOperators(t *testing.T) {
	prog := fixture.Build(t, src("ownnew.cc"), "-g", "-O2")
	rec := recordArgs(t, "", prog)
	var allocs, frees uint64
	if _, err := fmt.Sscanf(rec.stdout, "%d %d", &allocs, &frees); err != nil || rec.res.Program.ExitCode() != 0 {
		t.Fatalf("the program said %q and ended with status %d\n%s", rec.stdout, rec.res.Program.ExitCode(), rec.stderr)
	}
	if len(rec.model.Processes) != 1 {
		t.Fatalf("%d processes recorded, want 1", len(rec.model.Processes))
	}
	p := rec.model.Processes[0]
	s := p.Summary
	if s.Allocations != allocs-1 || s.Frees != frees-1 || s.InUseAtExitBlocks != 0 {
		t.Errorf("recorded %d allocations, %d frees, %d blocks in use at exit; the program made %d and %d, and all were freed",
			s.Allocations, s.Frees, s.InUseAtExitBlocks, allocs, frees)
	}
	if len(p.Problems) != 0 || s.UncertainFrees != 1 {
		t.Errorf("problems %+v, %d uncertain frees; want none, and the free of the exception object uncertain", p.Problems, s.UncertainFrees)
	}
	if p.Lost != 0 || !slices.Equal(p.NotRecorded, []string{patchedWarning}) || strings.Contains(rec.stderr, "defines") {
		t.Errorf("%d events lost, not recorded %q; the recorder said:\n%s", p.Lost, p.NotRecorded, rec.stderr)
	}
}

// patchedWarning is what the trace says of a process recorded through
// its own allocator, patched.
const patchedWarning = "the program's own allocation functions were patched to pass through memtrail: " +
	trace.LostOwnAllocator +
	"; frees of them are uncertain, and blocks counted in use at exit, and in the leak classes, may have been freed unseen"

// checkPatched records args patching as by default, and checks that
// each process recorded what valgrind counts, exactly, and nothing wrong.
func checkPatched(t *testing.T, args ...string) []*analysis.Process {
	t.Helper()
	rec := recordArgs(t, "", args...)
	if code := rec.res.Program.ExitCode(); code != 0 {
		t.Fatalf("the program ended with status %d, not 0: its own functions did not run as built\n%s", code, rec.stderr)
	}
	want := fixture.Valgrind(t, args...)
	ps := rec.model.Processes
	if len(ps) != 2 || len(want) != 2 {
		t.Fatalf("%d processes recorded, valgrind saw %d", len(ps), len(want))
	}
	// valgrind prints the child's summary first: it ends first.
	want[0], want[1] = want[1], want[0]
	for i, p := range ps {
		if p.Summary.Allocations == 0 {
			t.Errorf("pid %d: no allocation recorded", p.PID)
		}
		sameAsValgrind(t, p, want[i])
		if p.Lost != 0 || p.Summary.UncertainFrees != 0 || len(p.Problems) != 0 || !slices.Equal(p.NotRecorded, []string{patchedWarning}) ||
			!slices.Equal(p.LostReasons, []string{trace.LostOwnAllocator}) {
			t.Errorf("pid %d: %d events lost (%q), %d uncertain frees, problems %+v, not recorded %q",
				p.PID, p.Lost, p.LostReasons, p.Summary.UncertainFrees, p.Problems, p.NotRecorded)
		}
	}
	if strings.Contains(rec.stderr, "defines") {
		t.Errorf("the recorder warned of the program's allocator:\n%s", rec.stderr)
	}
	return ps
}

// TestPreloadedAllocator records a program run with a library that
// defines malloc preloaded before the agent: the warning names the
// library.
func TestPreloadedAllocator(t *testing.T) {
	lib := fixture.Build(t, src("ownmalloc.c"), "-shared", "-fPIC")
	rec := recordArgs(t, "", "/bin/sh", "-c", "LD_PRELOAD="+lib+":$LD_PRELOAD /bin/true")
	want := lib + ", loaded before memtrail's agent, defines malloc, free, calloc and realloc itself: " +
		"calls to them do not pass through memtrail and are not recorded"
	var warned []string
	for _, p := range rec.model.Processes {
		if p.Exe == "/bin/true" || p.Exe == "/usr/bin/true" {
			warned = append(warned, p.NotRecorded...)
		} else if len(p.NotRecorded) > 0 {
			t.Errorf("pid %d (%s), without the library, says %q", p.PID, p.Exe, p.NotRecorded)
		}
	}
	if len(warned) != 1 || warned[0] != want {
		t.Errorf("true says %q, want %q", warned, want)
	}
	if n := strings.Count(rec.stderr, want); n != 1 {
		t.Errorf("the recorder said it %d times, want once:\n%s", n, rec.stderr)
	}
}

// TestOwnAllocatorPatchedLate records, patching as by default, the
// program of TestOwnAllocator linked with a library whose constructor
// allocates through the program's malloc before the agent patches it, a
// block main frees: that free is uncertain, not an invalid free, and the
// trace says why (trace.LostOwnAllocator) with no event counted lost.
func TestOwnAllocatorPatchedLate(t *testing.T) {
	lib := fixture.Build(t, src("earlyalloc.c"), "-shared", "-fPIC", "-g")
	prog := fixture.Build(t, src("ownmalloc.c"), "-g", "-O2", "-DEARLY", "-Wl,--no-as-needed", lib)
	rec := recordArgs(t, "", prog)
	if code := rec.res.Program.ExitCode(); code != 0 {
		t.Fatalf("the program ended with status %d, not 0\n%s", code, rec.stderr)
	}
	if len(rec.model.Processes) != 1 {
		t.Fatalf("%d processes recorded, want 1", len(rec.model.Processes))
	}
	p := rec.model.Processes[0]
	if p.Summary.Allocations == 0 || p.Summary.UncertainFrees != 1 || p.Summary.InvalidFrees != 0 || len(p.Problems) != 0 {
		t.Errorf("%d allocations, %d uncertain and %d invalid frees, problems %+v; want the early block's free uncertain, and no problem",
			p.Summary.Allocations, p.Summary.UncertainFrees, p.Summary.InvalidFrees, p.Problems)
	}
	if p.Lost != 0 || !slices.Equal(p.LostReasons, []string{trace.LostOwnAllocator}) || !p.PatchedAllocator() {
		t.Errorf("%d events lost (%q), want 0, for the reason %q", p.Lost, p.LostReasons, trace.LostOwnAllocator)
	}
	var text, js strings.Builder
	if err := report.Text(&text, rec.model, report.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"the program's own allocation functions were patched to pass through memtrail",
		"1 free of addresses not in use are uncertain, not called invalid or double frees: operations of the program's own allocator that memtrail did not see",
		"uncertain frees",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the report does not say %q:\n%s", want, text.String())
		}
	}
	for _, bad := range []string{"invalid free", "lost events", "0 events"} {
		if strings.Contains(text.String(), bad) {
			t.Errorf("the report says %q:\n%s", bad, text.String())
		}
	}
	if err := report.JSON(&js, rec.model, report.Options{}); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Summary struct {
			InvalidFrees   uint64 `json:"invalid_frees"`
			UncertainFrees uint64 `json:"uncertain_frees"`
			LostEvents     uint64 `json:"lost_events"`
		} `json:"summary"`
		Problems struct {
			InvalidFrees, DoubleFrees []any
		} `json:"problems"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(js.String()), &out); err != nil {
		t.Fatalf("the JSON report: %v\n%s", err, js.String())
	}
	if s := out.Summary; s.UncertainFrees != 1 || s.InvalidFrees != 0 || s.LostEvents != 0 ||
		len(out.Problems.InvalidFrees)+len(out.Problems.DoubleFrees) != 0 || !slices.ContainsFunc(out.Warnings, func(w string) bool {
		return strings.Contains(w, trace.LostOwnAllocator)
	}) {
		t.Errorf("the JSON report says %+v, want 1 uncertain free, no problem, and why", out)
	}
}

// TestStaticAllocators records, as memtrail run does by default, a C++
// program linked with jemalloc's and with tcmalloc's archive, so that
// malloc, free, operator new and the rest are the executable's own (as in
// a server built that way): the agent patches them, and what main
// allocated and freed, by every function it called, is recorded exactly
// as the program counted it, with the leak classes it made, no event lost,
// no uncertain free and no problem. (valgrind replaces such an
// allocator: its counts are of another program's run, so the program's
// own counts are the oracle here.)
func TestStaticAllocators(t *testing.T) {
	for _, lib := range []string{"libjemalloc.a", "libtcmalloc_minimal.a"} {
		t.Run(lib, func(t *testing.T) {
			t.Parallel()
			archive := filepath.Join("/usr/lib/x86_64-linux-gnu", lib)
			if _, err := os.Stat(archive); err != nil {
				t.Fatalf("the allocator's archive is needed (.ci/run installs it): %v", err)
			}
			// Whole, for the archive comes before the program's
			// object on the command line.
			prog := fixture.Build(t, src("staticalloc.cc"), "-g", "-O2",
				"-Wl,--whole-archive", archive, "-Wl,--no-whole-archive", "-lm")
			rec := recordArgs(t, "", prog)
			var allocs, frees, bytes, lost, reachable uint64
			if _, err := fmt.Sscanf(rec.stdout, "%d %d %d %d %d", &allocs, &frees, &bytes, &lost, &reachable); err != nil ||
				rec.res.Program.ExitCode() != 0 {
				t.Fatalf("the program said %q and ended with status %d\n%s", rec.stdout, rec.res.Program.ExitCode(), rec.stderr)
			}
			if len(rec.model.Processes) != 1 {
				t.Fatalf("%d processes recorded, want 1", len(rec.model.Processes))
			}
			p := rec.model.Processes[0]
			// The program's own calls: those of main and lose (not,
			// say, printf's buffer).
			var got analysis.Site
			for _, s := range p.TopSites(analysis.ByAllocations, 0) {
				if frames := p.SiteStack(s); len(frames) > 0 && strings.HasSuffix(frames[0].File, "staticalloc.cc") {
					got.Allocations += s.Allocations
					got.Frees += s.Frees
					got.BytesAllocated += s.BytesAllocated
					got.InUseAtExitBytes += s.InUseAtExitBytes
				}
			}
			if got.Allocations != allocs || got.Frees != frees || got.BytesAllocated != bytes || got.InUseAtExitBytes != lost+reachable {
				t.Errorf("main: recorded %d allocations, %d frees, %d bytes, %d bytes in use at exit; the program made %d, %d, %d and left %d",
					got.Allocations, got.Frees, got.BytesAllocated, got.InUseAtExitBytes, allocs, frees, bytes, lost+reachable)
			}
			scan := p.LeakScan
			if scan == nil || scan.DefinitelyLostBytes != lost || scan.DefinitelyLostBlocks != 1 || scan.StillReachableBytes < reachable {
				t.Errorf("leak classes %+v; want %d bytes definitely lost in 1 block, at least %d still reachable", scan, lost, reachable)
			}
			if p.Lost != 0 || p.Summary.UncertainFrees != 0 || len(p.Problems) != 0 || !slices.Equal(p.NotRecorded, []string{patchedWarning}) {
				t.Errorf("%d events lost (%q), %d uncertain frees, problems %+v, not recorded %q; the recorder said:\n%s",
					p.Lost, p.LostReasons, p.Summary.UncertainFrees, p.Problems, p.NotRecorded, rec.stderr)
			}
		})
	}
}
