package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestDiff records two builds of one program, the second with buffers 1000
// bytes bigger, and compares them: the stack of the buffers grew by what
// the source says, and nothing else changed.
func TestDiff(t *testing.T) {
	dir := t.TempDir()
	var traces []string
	for i, scale := range []string{"1", "2"} {
		prog := fixture.Build(t, filepath.Join("testdata", "leaks.c"), "-g", "-O0", "-DSCALE="+scale)
		trace := filepath.Join(dir, "leaks"+scale+".mtr")
		var stderr bytes.Buffer
		if code, err := run([]string{"run", "-q", "-o", trace, "--", prog}, &bytes.Buffer{}, &stderr); code != 0 || err != nil {
			t.Fatalf("recording build %d: status %d (%v)\n%s", i+1, code, err, stderr.String())
		}
		traces = append(traces, trace)
	}
	var out bytes.Buffer
	if code, err := run([]string{"diff", "-json", traces[0], traces[1]}, &out, &bytes.Buffer{}); code != 0 || err != nil {
		t.Fatalf("diff -json: status %d (%v)", code, err)
	}
	var d struct {
		Totals []struct {
			Cost     string
			Old, New uint64
			Change   int64
		}
		Stacks []struct {
			Stack   []struct{ Function string }
			Changes []struct {
				Cost   string
				Change int64
			}
		}
	}
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatalf("diff -json: %v\n%s", err, out.String())
	}
	// 10 buffers of 1000 bytes more each, 5 of them still allocated at
	// exit; the peak (the 1 MiB block, with the 5 kept buffers live) by 5.
	want := map[string]int64{"peak": 5000, "allocated": 10000, "allocations": 0, "leaked": 5000}
	for _, tot := range d.Totals {
		if tot.Change != want[tot.Cost] || int64(tot.New)-int64(tot.Old) != tot.Change {
			t.Errorf("total %s: %d -> %d, change %d; want a change of %d", tot.Cost, tot.Old, tot.New, tot.Change, want[tot.Cost])
		}
	}
	if len(d.Stacks) != 1 || d.Stacks[0].Stack[0].Function != "make_buffer" {
		t.Fatalf("stacks that changed: %+v; want make_buffer's alone", d.Stacks)
	}
	for _, c := range d.Stacks[0].Changes {
		if c.Change != want[c.Cost] {
			t.Errorf("make_buffer's %s changed by %d, want %d", c.Cost, c.Change, want[c.Cost])
		}
	}

	out.Reset()
	if code, err := run([]string{"diff", traces[0], traces[1]}, &out, &bytes.Buffer{}); code != 0 || err != nil {
		t.Fatalf("diff: status %d (%v)", code, err)
	}
	for _, w := range []string{"bytes allocated", "+9.77 KiB (+", "Bytes allocated by call stack", "grew #1 +9.77 KiB", "make_buffer (", "leaks.c:"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("diff: no %q in\n%s", w, out.String())
		}
	}
	if strings.Contains(out.String(), "shrank") {
		t.Errorf("diff: a stack shrank, but none did:\n%s", out.String())
	}

	checkBadInput(t, []string{"diff", traces[0]}, 2, "needs two trace files")
	checkBadInput(t, []string{"diff", traces[0], filepath.Join(dir, "none.mtr")}, 1, "no such file")
	checkBadInput(t, []string{"diff", "-old-pid", "1", traces[0], traces[1]}, 1, "process 1 is not in this trace")
}
