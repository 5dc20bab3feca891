package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtrail/memtrail/internal/fixture"
)

// kernelAtLeast says whether the running kernel is version major.minor or
// later.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var maj, min int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &maj, &min)
	return maj > major || maj == major && min >= minor
}

// leakScanOf returns the leak_scan of process id in the JSON report of
// trace, and its definitely lost bytes (0 if not scanned).
func leakScanOf(t *testing.T, trace, id string) (string, uint64) {
	t.Helper()
	out, _ := runOK(t, "report", "-json", "-pid", id, trace)
	var rep struct {
		Summary struct {
			LeakScan       string  `json:"leak_scan"`
			DefinitelyLost *uint64 `json:"definitely_lost_bytes"`
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report -json -pid %s: %v\n%s", id, err, out)
	}
	if rep.Summary.DefinitelyLost == nil {
		return rep.Summary.LeakScan, 0
	}
	return rep.Summary.LeakScan, *rep.Summary.DefinitelyLost
}

// TestKilledGrandchildren records testdata/killed.c: a child that kills
// 10 grandchildren with SIGKILL and reaps each at once, before the
// recorder can see it as a zombie. Each grandchild must end "killed by
// signal 9 (SIGKILL)", with that as the reason it has no leak scan, in
// the JSON and in the text (on a kernel before 6.15, which keeps no exit
// status for the recorder, an end not known, which says so); the child, which exits normally, is scanned
// (its 300 bytes definitely lost), except with -leak-check=false, which
// its reason then names.
func TestKilledGrandchildren(t *testing.T) {
	type ending struct{ end, noScan string }
	endings := []ending{{"killed by signal 9 (SIGKILL)", "killed by signal 9 (SIGKILL): no scan at exit"}}
	if !kernelAtLeast(t, 6, 15) {
		// No exit status kept for a pidfd: unless the recorder saw it
		// as a zombie, the end is unknown, and says so.
		endings = append(endings, ending{"ended without a known status", "ended without calling exit, how not known (its parent reaped it first): no scan at exit"})
	}
	for _, leakCheck := range []bool{true, false} {
		var opts []string
		if !leakCheck {
			opts = []string{"-leak-check=false"}
		}
		prog := fixture.Build(t, filepath.Join("testdata", "killed.c"))
		trace := filepath.Join(t.TempDir(), "killed.mtr")
		runOK(t, append(append([]string{"run", "-q", "-o", trace}, opts...), "--", prog, "10")...)
		list := processesOf(t, trace)
		if len(list) != 12 {
			t.Fatalf("-leak-check=%v: %d processes, want 12 (the program, its child, 10 grandchildren): %+v", leakCheck, len(list), list)
		}
		main, child := list[0], list[1]
		grandchildren := 0
		for _, p := range list[2:] {
			if p.PPID != child.PID {
				t.Errorf("-leak-check=%v: process %s is not a child of %s", leakCheck, p.ID, child.ID)
				continue
			}
			grandchildren++
			why, _ := leakScanOf(t, trace, p.ID)
			i := slices.IndexFunc(endings, func(e ending) bool { return e.noScan == why })
			if i < 0 {
				t.Errorf("-leak-check=%v: grandchild %s: leak_scan %q, want %q", leakCheck, p.ID, why, endings[0].noScan)
				continue
			}
			text, _ := runOK(t, "report", "-pid", p.ID, trace)
			for _, want := range []string{", " + endings[i].end + " after ", "leak classes    " + endings[i].noScan} {
				if !strings.Contains(text, want) {
					t.Errorf("-leak-check=%v: no %q in the report of grandchild %s:\n%s", leakCheck, want, p.ID, text)
				}
			}
		}
		if grandchildren != 10 {
			t.Errorf("-leak-check=%v: %d grandchildren, want 10", leakCheck, grandchildren)
		}
		for _, p := range []listedProcess{main, child} {
			why, lost := leakScanOf(t, trace, p.ID)
			switch {
			case leakCheck && why != "done":
				t.Errorf("process %s, which exited: leak_scan %q, want done", p.ID, why)
			case leakCheck && p.ID == child.ID && lost != 300:
				t.Errorf("the child %s: %d bytes definitely lost, want 300", p.ID, lost)
			case !leakCheck && why != "not scanned (recorded with -leak-check=false)":
				t.Errorf("-leak-check=false: process %s: leak_scan %q", p.ID, why)
			}
		}
	}
}

// TestKilledDuringScan records testdata/killedscan.c: a child with a
// million live blocks calls exit, and its parent kills it with SIGTERM
// while the leak scan holds it there (as chromium's browser ends its
// renderers). memtrail says that the process ended while it was being
// scanned, not only that its memory could not be read, and the report
// gives the signal as the reason the child has no leak classes. The
// program tries again if the child ended before the signal; once is the
// rule.
func TestKilledDuringScan(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("testdata", "killedscan.c"), "-O2")
	for attempt := 1; ; attempt++ {
		dir := t.TempDir()
		trace, verdict := filepath.Join(dir, "killedscan.mtr"), filepath.Join(dir, "verdict")
		_, stderr := runOK(t, "run", "-o", trace, "--", prog, verdict)
		out, err := os.ReadFile(verdict)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != "killed" {
			if attempt == 3 {
				t.Fatalf("the child ended before its parent could kill it, 3 times: %q", out)
			}
			continue
		}
		list := processesOf(t, trace)
		if len(list) != 2 {
			t.Fatalf("%d processes, want 2: %+v", len(list), list)
		}
		child := list[1]
		said := fmt.Sprintf("memtrail: process %d (%s): no leak scan: the process ended while it was being scanned (", child.PID, prog)
		if !strings.Contains(stderr, said) {
			t.Errorf("memtrail did not say %q; it said:\n%s", said, stderr)
		}
		if why, _ := leakScanOf(t, trace, child.ID); why != "killed by signal 15 (SIGTERM) during the scan at exit" {
			t.Errorf("the child's leak_scan is %q", why)
		}
		return
	}
}
