package record_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/trace"
)

// TestOwnAllocator records a program that defines malloc, free, calloc
// and realloc itself, and forks: the recorder warns once for each of its
// processes, naming it and the functions, and the trace says it too.
func TestOwnAllocator(t *testing.T) {
	prog := fixture.Build(t, src("ownmalloc.c"))
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
