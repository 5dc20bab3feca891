package record_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/trace"
)

// TestOwnAllocator records a program that defines malloc, free, calloc
// and realloc itself, and forks, built so that its functions start with a
// frame (-O0), are a tail jump to glibc's (-O2), or begin as chromium's do
// (PROLOGUES, see the fixture). The agent patches their entries: in each process every allocation, the program's own and libc's
// on its behalf, is recorded once, as valgrind counts them, with no event
// lost (its calloc calls its own malloc), no problem and no warning.
func TestOwnAllocator(t *testing.T) {
	for _, flags := range [][]string{{"-O0"}, {"-O2"}, {"-O2", "-DPROLOGUES"}} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			t.Parallel()
			prog := fixture.Build(t, src("ownmalloc.c"), append([]string{"-g"}, flags...)...)
			rec := recordArgs(t, "", prog, "fork")
			if code := rec.res.Program.ExitCode(); code != 0 {
				t.Fatalf("the program ended with status %d, not 0: its own functions did not run as built\n%s", code, rec.stderr)
			}
			want := fixture.Valgrind(t, prog, "fork")
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
				if p.Lost != 0 || p.Summary.UncertainFrees != 0 || len(p.Problems) != 0 || len(p.NotRecorded) != 0 {
					t.Errorf("pid %d: %d events lost (%q), %d uncertain frees, problems %+v, not recorded %q",
						p.PID, p.Lost, p.LostReasons, p.Summary.UncertainFrees, p.Problems, p.NotRecorded)
				}
			}
			if strings.Contains(rec.stderr, "defines") {
				t.Errorf("the recorder warned of the program's allocator:\n%s", rec.stderr)
			}
		})
	}
}

// TestOwnAllocatorRefused records a program whose malloc starts with an
// instruction the agent does not move: none of its functions is patched
// (a block seen allocated and not freed, or the reverse, would be a false
// leak or an invalid free), and the recorder warns once for each of its
// processes, naming it and the functions, and the trace says it too.
func TestOwnAllocatorRefused(t *testing.T) {
	prog := fixture.Build(t, src("ownmalloc.c"), "-g", "-O2", "-DREFUSED")
	rec := recordArgs(t, "", prog, "fork")
	ps := rec.model.Processes
	if len(ps) != 2 {
		t.Fatalf("%d processes, want 2", len(ps))
	}
	const what = "the program defines malloc, free, calloc and realloc itself: " +
		"calls to them do not pass through memtrail and are not recorded"
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
