package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestCutStacks records allocations at the bottom of a recursion 300 calls
// deep (305 frames). Below that depth limit their stack keeps its
// innermost frames under a root that says how many were left out, and the
// report, as text and as JSON, warns with exactly how many allocations and
// bytes of the peak that hides; with the highest limit the stack is whole,
// from descend to _start, and there is no warning.
func TestCutStacks(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("testdata", "deep300.c"))
	for _, c := range []struct {
		limit   int
		frames  int    // of the peak's top stack
		root    string // its outermost frame
		warning bool
	}{
		{64, 65, "[241 frames not recorded]", true},
		{300, 301, "[5 frames not recorded]", true},
		{305, 305, "_start", false},
		{1024, 305, "_start", false},
	} {
		t.Run(strconv.Itoa(c.limit), func(t *testing.T) {
			trace := filepath.Join(t.TempDir(), "deep.mtr")
			var stdout, stderr bytes.Buffer
			if code, err := run([]string{"run", "-q", "-max-frames", strconv.Itoa(c.limit), "-o", trace, prog}, &stdout, &stderr); code != 0 || err != nil {
				t.Fatalf("run: %d %v\n%s", code, err, stderr.String())
			}
			if code, err := run([]string{"report", "-json", trace}, &stdout, &stderr); code != 0 || err != nil {
				t.Fatalf("report -json: %d %v\n%s", code, err, stderr.String())
			}
			var r struct {
				PID  uint64 `json:"pid"`
				Peak []struct {
					PeakBytes uint64 `json:"peak_bytes"`
					Stack     []struct {
						Function string `json:"function"`
					} `json:"stack"`
				} `json:"peak"`
				Warnings []string `json:"warnings"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			top := r.Peak[0]
			if top.PeakBytes != 3000 || len(top.Stack) != c.frames || top.Stack[0].Function != "descend" ||
				top.Stack[len(top.Stack)-1].Function != c.root {
				t.Errorf("top stack at the peak: %d bytes, %d frames from %s to %s; want 3000 bytes, %d frames from descend to %s",
					top.PeakBytes, len(top.Stack), top.Stack[0].Function, top.Stack[len(top.Stack)-1].Function, c.frames, c.root)
			}
			want := []string{}
			if c.warning {
				want = []string{fmt.Sprintf("pid %d: call stacks cut at %d frames: 3 allocations, 3000 bytes at the peak (75.0%% of it); "+
					"record with a larger -max-frames to see them whole", r.PID, c.limit)}
			}
			if !slices.Equal(r.Warnings, want) {
				t.Errorf("JSON warnings %q, want %q", r.Warnings, want)
			}
			stdout.Reset()
			if code, err := run([]string{"report", trace}, &stdout, &stderr); code != 0 || err != nil {
				t.Fatalf("report: %d %v\n%s", code, err, stderr.String())
			}
			for _, w := range want {
				if !strings.HasPrefix(stdout.String(), "warning: "+w+"\n") {
					t.Errorf("the text report does not begin with the warning %q:\n%.300s", w, stdout.String())
				}
			}
			if !c.warning && strings.Contains(stdout.String(), "warning") {
				t.Errorf("a warning in the text report:\n%.300s", stdout.String())
			}
		})
	}
}
