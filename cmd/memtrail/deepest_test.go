package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestDeepestUnnamedFrames records report's testdata/unnamed.c stripped, so that
// its frames are known only by their addresses. The deepest stack runs
// through ping and pong calling each other, distinct frames that the JSON
// and the text must both list one by one, each at its own address, and
// through self calling itself, which the text collapses into "× 4" (the
// innermost call of self, at the malloc, has an address of its own).
func TestDeepestUnnamedFrames(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "unnamed")
	built := fixture.Build(t, filepath.Join("..", "..", "internal", "report", "testdata", "unnamed.c"), "-g0", "-O0")
	if out, err := exec.Command("strip", "-o", prog, built).CombinedOutput(); err != nil {
		t.Fatalf("strip: %v\n%s", err, out)
	}
	trace := filepath.Join(dir, "unnamed.mtr")
	runOK(t, "run", "-q", "-o", trace, "--", prog)

	out, _ := runOK(t, "report", "-json", trace)
	var rep struct {
		Summary struct {
			Deepest struct {
				Stack []struct {
					Function, Name, Object, Address string
				}
			} `json:"deepest_stack"`
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report -json: %v\n%s", err, out)
	}
	// The program's frames, innermost first: self at the malloc, self × 4,
	// pong at its call of self, ping at its call of pong, pong at its
	// call of ping, ping at its call of pong again, main.
	var names []string
	for _, f := range rep.Summary.Deepest.Stack {
		if f.Object != prog {
			continue
		}
		if f.Function != "" {
			t.Fatalf("frame %+v of the stripped program has a name", f)
		}
		names = append(names, f.Name)
	}
	if len(names) < 10 {
		t.Fatalf("deepest stack has %d frames of %s, want 10 at least: %v", len(names), prog, names)
	}
	names = names[:10]
	self, ping, pong := names[1], names[6], names[7]
	for i, want := range []string{self, self, self, self, names[5], ping, pong, ping} {
		if names[i+1] != want {
			t.Errorf("frame %d of the deepest stack is %s, want %s: %v", i+1, names[i+1], want, names)
		}
	}
	distinct := map[string]bool{}
	for _, n := range names {
		distinct[n] = true
	}
	if len(distinct) != 6 {
		t.Errorf("the deepest stack's 10 frames of the program have %d addresses, want 6: %v", len(distinct), names)
	}

	text, _ := runOK(t, "report", "-frames", "20", trace)
	want := "in:\n"
	for _, line := range []string{names[0], self + " × 4", names[5], ping, pong, ping, names[9]} {
		want += fmt.Sprintf("    %s\n", line)
	}
	if !strings.Contains(text, want) {
		t.Errorf("the text report's deepest stack is not\n%s\nin\n%s", want, text)
	}
}
