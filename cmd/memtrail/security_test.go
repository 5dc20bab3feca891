package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/gob"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// forgedCache is the layout of an analysis cache, as one who read the
// source would write it (gob matches fields by name).
type forgedCache struct {
	Trace struct {
		Size, ModTime int64
		Sum           [32]byte
	}
	Entries []struct {
		Key   string
		Model []byte
	}
}

// TestPlantedAnalysisCache is the attack of issue 19 item 5: another user
// puts beside a trace that breaks a budget the cache of one that holds
// it, labeled with the trace's size, time and hash (a small trace is
// all first 64 KiB). check must still say the budget is broken.
func TestPlantedAnalysisCache(t *testing.T) {
	fixture.OtherUser(t)
	shared := sharedDir(t)
	big := writeTrace(t, shared, "big.mtr", strings.Replace(smallTrace, "size=32", "size=4096", 1))
	donor := writeTrace(t, t.TempDir(), "small.mtr", smallTrace)
	args := []string{"check", "-max-peak", "100"}
	if status, err := run(append(args, donor), &bytes.Buffer{}, &bytes.Buffer{}); status != 0 || err != nil {
		t.Fatalf("check of the small trace: status %d, %v", status, err)
	}
	cache, err := os.ReadFile(donor + ".cache")
	if err != nil {
		t.Fatal(err)
	}
	header := len("memtrail analysis cache\n") + 1
	var cf forgedCache
	if err := gob.NewDecoder(bytes.NewReader(cache[header:])).Decode(&cf); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(big)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(big)
	if err != nil {
		t.Fatal(err)
	}
	cf.Trace.Size, cf.Trace.ModTime, cf.Trace.Sum = fi.Size(), fi.ModTime().UnixNano(), sha256.Sum256(data)
	var forged bytes.Buffer
	forged.Write(cache[:header])
	if err := gob.NewEncoder(&forged).Encode(cf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, "forged"), forged.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := fixture.AsOtherUser(t, "cp", filepath.Join(shared, "forged"), big+".cache").CombinedOutput(); err != nil {
		t.Fatalf("planting: %v: %s", err, out)
	}

	var stdout bytes.Buffer
	status, err := run(append(args, big), &stdout, &bytes.Buffer{})
	if status != 3 || !strings.Contains(stdout.String(), "FAIL peak heap") {
		t.Errorf("check of the trace that breaks the budget, with a cache planted beside it: status %d, %v\n%s", status, err, stdout.String())
	}
}

// TestPrivateFiles: what memtrail writes holds the command line, paths
// and the host name; each file it creates is private (0600), whatever
// the umask: traces with and without -o, the analysis cache, exports and
// the HTML page.
func TestPrivateFiles(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0))
	dir := t.TempDir()
	t.Chdir(dir)
	trace := filepath.Join(dir, "t.mtr")
	for _, args := range [][]string{
		{"run", "-q", "-o", trace, "--", "true"},
		{"run", "-q", "--", "true"},
		{"report", trace},
		{"export", "-format", "pprof", "-o", filepath.Join(dir, "t.pb.gz"), trace},
		{"export", "-format", "parquet", "-o", filepath.Join(dir, "parquet"), trace},
		{"report", "-html", filepath.Join(dir, "t.html"), trace},
	} {
		if status, err := run(args, &bytes.Buffer{}, &bytes.Buffer{}); status != 0 || err != nil {
			t.Fatalf("%q: status %d, %v", args, status, err)
		}
	}
	named, _ := filepath.Glob(filepath.Join(dir, "true.*.mtr"))
	files := append(named, trace, trace+".cache", filepath.Join(dir, "t.pb.gz"),
		filepath.Join(dir, "parquet", "events.parquet"), filepath.Join(dir, "parquet", "stacks.parquet"), filepath.Join(dir, "t.html"))
	if len(named) != 1 {
		t.Errorf("no trace named after the program: %v", named)
	}
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want 0600", f, fi.Mode(), err)
		}
	}
}
