package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestServedAt reads the root and the token from memtrail view's line.
func TestServedAt(t *testing.T) {
	url, token, err := servedAt(strings.NewReader("memtrail: prog.mtr is at http://127.0.0.1:40123/?token=00ff9a (Ctrl-C stops)\n"))
	if err != nil || url != "http://127.0.0.1:40123" || token != "00ff9a" {
		t.Errorf("%q, %q, %v; want http://127.0.0.1:40123, 00ff9a", url, token, err)
	}
	for _, line := range []string{"", "memtrail: prog.mtr is at http://127.0.0.1:40123/ (Ctrl-C stops)\n"} {
		if _, _, err := servedAt(strings.NewReader(line)); err == nil {
			t.Errorf("%q: no error", line)
		}
	}
}

// TestWebTraces: dense and python3 by default, bigheap (cold) only when
// -only names it, and a clear error for a workload with no web trace.
func TestWebTraces(t *testing.T) {
	names := func(only string) (string, error) {
		trs, err := webTraces("/d", only)
		var s []string
		for _, tr := range trs {
			s = append(s, tr.workload)
			if tr.cold != (tr.workload == "bigheap") {
				t.Errorf("%s: cold %v", tr.workload, tr.cold)
			}
		}
		return strings.Join(s, ","), err
	}
	for only, want := range map[string]string{"": "dense,python3", "bigheap": "bigheap", "bigheap,dense": "bigheap,dense"} {
		if got, err := names(only); got != want || err != nil {
			t.Errorf("-only %q: %s, %v; want %s", only, got, err, want)
		}
	}
	if _, err := names("sqlite3"); err == nil || !strings.Contains(err.Error(), `no web trace of "sqlite3"`) {
		t.Errorf("-only sqlite3: %v", err)
	}
}

func TestWebBars(t *testing.T) {
	var b strings.Builder
	webBars(&b, 1500*time.Millisecond, 1200*time.Millisecond)
	for _, want := range []string{"| 1.50 s | yes |", "| 1.20 s | no |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}

// TestWebRunsSmallTrace runs the web benchmark once on a small bigheap
// trace, cold: every request it makes must be answered (the server wants
// its token, then the cookie it sets).
func TestWebRunsSmallTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds memtrail")
	}
	dir := t.TempDir()
	memtrail := filepath.Join(dir, "memtrail")
	if out, err := exec.Command("go", "build", "-o", memtrail, "../cmd/memtrail").CombinedOutput(); err != nil {
		t.Fatalf("building memtrail: %v\n%s", err, out)
	}
	prog := fixture.Build(t, "workloads/bigheap.c", "-O2", "-g")
	trace := filepath.Join(dir, "web.mtr")
	if out, err := exec.Command(memtrail, "run", "-q", "-o", trace, "--", prog, "20000").CombinedOutput(); err != nil {
		t.Fatalf("recording: %v\n%s", err, out)
	}
	var b strings.Builder
	if err := webRuns(&b, memtrail, trace, "bigheap", 0, true, 1); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"no analysis cache", "| page to timeline | 5 |", "| a window of 40% from the start of the run (a new analysis) | 1 |", "| bar | measured | met? |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}

// TestWebOnlyRefused refuses -web -only naming a workload with no web
// trace before it builds anything.
func TestWebOnlyRefused(t *testing.T) {
	err := run(1, "jq", modes{web: true})
	if err == nil || !strings.Contains(err.Error(), `no web trace of "jq"`) {
		t.Errorf("-web -only jq: error %v", err)
	}
}
