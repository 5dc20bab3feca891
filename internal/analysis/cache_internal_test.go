package analysis

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

func identifyFile(t *testing.T, path string) (traceID, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, owner, err := identify(f)
	if err != nil {
		t.Fatal(err)
	}
	return id, owner
}

// TestCacheBoundToWholeTrace: a cache is about every byte of its trace.
// One written for a file is not read for that file changed in the middle
// with its size, modification time, and first and last 64 KiB kept, as a
// forger would.
func TestCacheBoundToWholeTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.mtr")
	data := make([]byte, 1<<20)
	rand.New(rand.NewSource(1)).Read(data)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	id, owner := identifyFile(t, path)
	paths := []string{path + ".cache"}
	writeCache(paths, cacheFile{Trace: id, Entries: []cacheEntry{{Key: "k", Model: []byte("model")}}})
	if got := readCache(paths, id, owner); len(got) != 1 {
		t.Fatalf("the cache was not read back: %v", got)
	}
	data[len(data)/2] ^= 1
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	changed, _ := identifyFile(t, path)
	if got := readCache(paths, changed, owner); got != nil {
		t.Errorf("the cache of the trace was read for the trace changed in the middle: %v", got)
	}
}

// TestCacheEntryDamaged: an entry whose compressed model is damaged or
// cut short is an error (the trace is then analyzed again), never a panic.
func TestCacheEntryDamaged(t *testing.T) {
	m := &Model{Processes: []*Process{{ID: 1, Exe: "/bin/true", Args: []string{"true"}}}}
	data, err := encodeModel(m)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := decodeModel(data); err != nil || back.Processes[0].Exe != "/bin/true" {
		t.Fatalf("round trip: %v, %+v", err, back)
	}
	flipped := append([]byte(nil), data...)
	flipped[len(flipped)/2] ^= 0xff
	for name, bad := range map[string][]byte{
		"empty":     nil,
		"cut short": data[:len(data)/2],
		"flipped":   flipped,
		"not zstd":  []byte("gob, not compressed"),
	} {
		if _, err := decodeModel(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
