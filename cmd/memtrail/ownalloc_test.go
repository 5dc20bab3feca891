package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestReportOwnAllocator records a program that defines malloc itself,
// with -patch-own-allocator=false: the text and JSON reports say which
// process bypasses memtrail, and what is not recorded.
func TestReportOwnAllocator(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("..", "..", "internal", "record", "testdata", "ownmalloc.c"))
	out := filepath.Join(t.TempDir(), "own.mtr")
	if code, err := run([]string{"run", "-q", "-patch-own-allocator=false", "-o", out, "--", prog}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 || err != nil {
		t.Fatalf("run: status %d, %v", code, err)
	}
	var text, js bytes.Buffer
	if code, err := run([]string{"report", out}, &text, &bytes.Buffer{}); code != 0 || err != nil {
		t.Fatalf("report: status %d, %v", code, err)
	}
	if code, err := run([]string{"report", "-json", out}, &js, &bytes.Buffer{}); code != 0 || err != nil {
		t.Fatalf("report -json: status %d, %v", code, err)
	}
	var r struct {
		PID      uint64
		Warnings []string
	}
	if err := json.Unmarshal(js.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("pid %d (%s): the program defines malloc, free, calloc and realloc itself: "+
		"calls to them do not pass through memtrail and are not recorded "+
		"(memtrail run -patch-own-allocator=false left them alone)", r.PID, prog)
	if !slices.Contains(r.Warnings, want) {
		t.Errorf("JSON warnings %q, want %q", r.Warnings, want)
	}
	if !strings.Contains(text.String(), "warning: "+want+"\n") {
		t.Errorf("the report does not say %q:\n%s", want, text.String())
	}
}

// TestRunPatchOwnAllocator records the program of TestReportOwnAllocator
// as memtrail run does by default: its allocations are recorded, and the only
// warning says that its functions were patched, and what that misses.
func TestRunPatchOwnAllocator(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("..", "..", "internal", "record", "testdata", "ownmalloc.c"))
	out := filepath.Join(t.TempDir(), "own.mtr")
	var stderr bytes.Buffer
	if code, err := run([]string{"run", "-q", "-o", out, "--", prog}, &bytes.Buffer{}, &stderr); code != 0 || err != nil {
		t.Fatalf("run: status %d, %v\n%s", code, err, stderr.String())
	}
	var js bytes.Buffer
	if code, err := run([]string{"report", "-json", out}, &js, &bytes.Buffer{}); code != 0 || err != nil {
		t.Fatalf("report -json: status %d, %v", code, err)
	}
	var r struct {
		Warnings []string
		Summary  struct{ Allocations, Frees uint64 }
	}
	if err := json.Unmarshal(js.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Summary.Allocations == 0 || r.Summary.Allocations != r.Summary.Frees || len(r.Warnings) != 1 ||
		!strings.Contains(r.Warnings[0], "own allocation functions were patched") || stderr.Len() != 0 {
		t.Errorf("%d allocations, %d frees, warnings %q; memtrail said %q", r.Summary.Allocations, r.Summary.Frees, r.Warnings, stderr.String())
	}
}
