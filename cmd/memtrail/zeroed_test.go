package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestNewBlocksReadZero records testdata/zeroed.c, which takes blocks of
// each size up to 300 bytes (and what realloc adds to a block) from
// memory it filled and freed: the agent clears each one, all of its
// usable size and nothing beyond, the small ones with inline stores and
// the others with memset. Natively the same blocks hold the pattern, so
// the program does see stale bytes where they are left.
func TestNewBlocksReadZero(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("testdata", "zeroed.c"))
	out, err := exec.Command(prog).Output()
	native := string(out)
	if err != nil {
		t.Fatalf("running natively: %v", err)
	}
	if f := strings.Fields(native); len(f) != 3 || f[1] == "0" {
		t.Fatalf("natively: %q, want stale bytes in the new blocks", native)
	}
	trace := filepath.Join(t.TempDir(), "zeroed.mtr")
	stdout, stderr, code := runMemtrail(t, "run", "-q", "-o", trace, "--", prog)
	if code != 0 {
		t.Fatalf("run: status %d\n%s", code, stderr)
	}
	if got := strings.TrimSpace(stdout); got != "900 0 0" {
		t.Errorf("under memtrail: blocks checked, stale bytes, guard bytes changed = %q, want \"900 0 0\"", got)
	}
}
