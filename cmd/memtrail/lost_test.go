package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// jsonSummary runs report -json on trace and returns its summary.
func jsonSummary(t *testing.T, trace string) map[string]any {
	t.Helper()
	var out bytes.Buffer
	if code, err := run([]string{"report", "-json", trace}, &out, &bytes.Buffer{}); code != 0 || err != nil {
		t.Fatalf("report -json %s: status %d, %v", trace, code, err)
	}
	var r struct{ Summary map[string]any }
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	return r.Summary
}

// TestNestedCallsNotLost records library functions that allocate through
// the allocator's own entry points (glibc's reallocarray calls realloc):
// each call is one event, none is reported lost, and the counts are
// valgrind's.
func TestNestedCallsNotLost(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("..", "..", "internal", "record", "testdata", "nested.c"))
	tr := filepath.Join(t.TempDir(), "t.mtr")
	var stderr bytes.Buffer
	if code, err := run([]string{"run", "-o", tr, "--", prog}, &bytes.Buffer{}, &stderr); code != 0 || err != nil {
		t.Fatalf("run: status %d, %v\n%s", code, err, stderr.String())
	}
	if strings.Contains(stderr.String(), "lost") {
		t.Errorf("memtrail run says events were lost:\n%s", stderr.String())
	}
	var text bytes.Buffer
	run([]string{"report", tr}, &text, &bytes.Buffer{})
	if strings.Contains(text.String(), "lost events") {
		t.Errorf("the text report says events were lost:\n%s", text.String())
	}
	s := jsonSummary(t, tr)
	want := fixture.Valgrind(t, prog)[0]
	for key, v := range map[string]uint64{
		"lost_events": 0, "allocations": want.Allocs, "frees": want.Frees, "bytes_allocated": want.BytesAllocated,
		"in_use_at_exit_bytes": want.InUseBytes, "invalid_frees": 0,
	} {
		if got, ok := s[key].(float64); !ok || uint64(got) != v {
			t.Errorf("%s: %v, want %d (valgrind's, or none)", key, s[key], v)
		}
	}
}
