package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/agent"
	"github.com/memtrail/memtrail/internal/fixture"
)

// sharedDir returns a directory every user can write to, as /tmp: sticky
// and world-writable, in the temporary directory so that another user
// can reach it.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "memtrail-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPlantedAgent is the attack of issue 19 item 1: with neither HOME nor
// XDG_CACHE_HOME set, memtrail's cache is in the temporary directory;
// another user creates it first, with a library named as the agent is.
// memtrail run must not load it into the program it records.
func TestPlantedAgent(t *testing.T) {
	fixture.OtherUser(t)
	lib := fixture.Build(t, filepath.Join("testdata", "planted.c"), "-shared", "-fPIC", "-O0")
	real, err := agent.Path(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(real)
	shared := sharedDir(t)
	code, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, "planted.so"), code, 0o755); err != nil {
		t.Fatal(err)
	}
	// Both where memtrail looked, and where it looks now: the names are
	// no secret.
	script := `for d in memtrail memtrail-0; do mkdir -m 0755 "$1/$d" && cp "$1/planted.so" "$1/$d/$2" || exit 1; done`
	if out, err := fixture.AsOtherUser(t, "sh", "-c", script, "sh", shared, name).CombinedOutput(); err != nil {
		t.Fatalf("planting: %v: %s", err, out)
	}
	marker := filepath.Join(t.TempDir(), "marker")
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("TMPDIR", shared)
	t.Setenv("MEMTRAIL_TEST_MARKER", marker)

	var stderr bytes.Buffer
	status, err := run([]string{"run", "-q", "-o", filepath.Join(t.TempDir(), "t.mtr"), "--", "true"}, &bytes.Buffer{}, &stderr)
	if _, serr := os.Stat(marker); serr == nil {
		t.Fatalf("memtrail run loaded the library another user planted (status %d, %v)", status, err)
	}
	if err == nil || !strings.Contains(err.Error(), filepath.Join(shared, "memtrail-0")) || !strings.Contains(err.Error(), "owned by uid") {
		t.Errorf("memtrail run: status %d, error %v; want one that names the cache directory and its owner", status, err)
	}
}
