package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestLSanOptions runs a leaking program built with -fsanitize=leak as
// bench runs the LSan rows: with the scan on, LeakSanitizer finds the
// leak and the run still succeeds; with it off, nothing is scanned.
func TestLSanOptions(t *testing.T) {
	src := filepath.Join(t.TempDir(), "leak.c")
	code := "#include <stdlib.h>\nint main(void) { void *volatile p = malloc(10); p = 0; return 0; }\n"
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	prog := fixture.Build(t, src, "-O2", "-g", "-fsanitize=leak")
	for _, detect := range []bool{true, false} {
		cmd := exec.Command(prog)
		cmd.Env = append(os.Environ(), lsanOptions(detect))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v (a leak must not fail the run)\n%s", lsanOptions(detect), err, out)
		}
		if reported := strings.Contains(string(out), "LeakSanitizer: detected memory leaks"); reported != detect {
			t.Errorf("%s: leak reported %v, want %v\n%s", lsanOptions(detect), reported, detect, out)
		}
	}
}

// TestLSanArgs runs LSan only on the workloads bench compiled, and only
// when their build with -fsanitize=leak is there.
func TestLSanArgs(t *testing.T) {
	dir := t.TempDir()
	dense := filepath.Join(dir, "dense")
	if got := lsanArgs([]string{dense, "25"}); got != nil {
		t.Errorf("no LSan build: %v, want nil", got)
	}
	if err := os.WriteFile(dense+lsanSuffix, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := lsanArgs([]string{dense, "25"}); len(got) != 2 || got[0] != dense+lsanSuffix || got[1] != "25" {
		t.Errorf("LSan build of dense: %v", got)
	}
	if got := lsanArgs([]string{"sqlite3", ":memory:"}); got != nil {
		t.Errorf("sqlite3: %v, want nil", got)
	}
}

func TestParseTools(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // the names, or the error's start
	}{
		{"", ""},
		{"native,memtrail", "native memtrail"},
		{"native,heaptrack,memtrail,lsan", "native heaptrack memtrail lsan"},
		{"memtrail", "-tools memtrail: native must be one"},
		{"native,valgrind", `-tools: no tool "valgrind"`},
		{"native,", `-tools: no tool ""`},
	} {
		names, err := parseTools(c.in)
		got := strings.Join(names, " ")
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, c.want) || (c.want == "" && got != "") {
			t.Errorf("-tools %q: %q, want %q", c.in, got, c.want)
		}
	}
}

// TestToolsChosen: -tools keeps the table's order, LSan as two rows.
func TestToolsChosen(t *testing.T) {
	names := func(ts []tool) string {
		var s []string
		for _, t := range ts {
			s = append(s, t.name)
		}
		return strings.Join(s, ", ")
	}
	for _, c := range []struct {
		chosen []string
		want   string
	}{
		{nil, "native, heaptrack, memtrail, " + lsanOn + ", " + lsanOff},
		{[]string{"memtrail", "native"}, "native, memtrail"},
		{[]string{"native", "lsan"}, "native, " + lsanOn + ", " + lsanOff},
	} {
		if got := names(append(tools("memtrail", c.chosen), lsanTools(c.chosen)...)); got != c.want {
			t.Errorf("-tools %v: %s, want %s", c.chosen, got, c.want)
		}
	}
}

func TestScanCells(t *testing.T) {
	on := sample{wall: 900 * time.Millisecond, cpu: 1500 * time.Millisecond}
	off := sample{wall: 1000 * time.Millisecond, cpu: 1000 * time.Millisecond}
	if got := lsanScan(on, off); got != 500*time.Millisecond {
		t.Errorf("LSan's scan %v, want 500ms", got)
	}
	if got := lsanScan(off, on); got != 0 {
		t.Errorf("LSan's scan in the noise %v, want 0", got)
	}
	for _, c := range []struct {
		scan, lsan time.Duration
		want       string
	}{
		{0, 0, "—"},
		{0, time.Second, "—"},
		{2880 * time.Millisecond, 0, "2.88 s"},
		{2880 * time.Millisecond, 720 * time.Millisecond, "2.88 s, 4.00× LSan's"},
		{2 * time.Millisecond, 0, "2 ms"},
		{400 * time.Millisecond, 800 * time.Millisecond, "400 ms, 0.50× LSan's"},
	} {
		if got := scanCell(c.scan, c.lsan); got != c.want {
			t.Errorf("scanCell(%v, %v) = %q, want %q", c.scan, c.lsan, got, c.want)
		}
	}
}

// TestLeakScanOf reads leak_scan_ns from memtrail report -json's summary,
// and refuses what is not JSON.
func TestLeakScanOf(t *testing.T) {
	scan, err := leakScanOf([]byte(`{"summary": {"leak_scan": "done", "leak_scan_ns": 2880000000}}`))
	if err != nil || scan != 2880*time.Millisecond {
		t.Errorf("%v, %v; want 2.88s", scan, err)
	}
	if scan, err := leakScanOf([]byte(`{"summary": {}}`)); err != nil || scan != 0 {
		t.Errorf("no scan: %v, %v; want 0", scan, err)
	}
	if _, err := leakScanOf([]byte("memtrail: not a trace")); err == nil {
		t.Error("not JSON: no error")
	}
}
