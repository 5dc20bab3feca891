package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestRunClosedStreams runs a program that reads its stdin, or writes its
// stdout or stderr, with that stream closed, natively and under memtrail
// run started with the same stream closed: the program must see it
// closed under memtrail too, and end the same way with the same stderr.
// Streams given as files still reach it as given. (A lone <>/dev/null
// cannot be told from a closed stream: see record's looksClosedAtStart.)
func TestRunClosedStreams(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("testdata", "streams.c"))
	shell := func(redirect string, args ...string) (stderr string, code int) {
		t.Helper()
		cmd := exec.Command("/bin/sh", append([]string{"-c", `exec "$@" ` + redirect, "sh"}, args...)...)
		cmd.Env = append(os.Environ(), "MEMTRAIL_TEST_MAIN=1")
		var errOut bytes.Buffer
		if !strings.Contains(redirect, "2>") {
			cmd.Stderr = &errOut
		}
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("%s %q: %v", redirect, args, err)
		}
		return errOut.String(), cmd.ProcessState.ExitCode()
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	os.WriteFile(in, []byte("abc\n"), 0o644)
	for _, c := range []struct {
		stream, redirect string
		code             int
	}{
		{"stdin", "<&-", 3},
		{"stdout", ">&-", 3},
		{"stderr", "2>&-", 3},
		{"stdin", "</dev/null", 0},
		{"stdout", ">/dev/null", 0},
		{"stderr", "2>/dev/null", 0},
		// One /dev/null for reading and writing on two fds, as
		// daemon(3) gives: the runtime never opens one so.
		{"stdin", "<>/dev/null >&0", 0},
		{"stdout", "<>/dev/null >&0", 0},
		{"stdin", "<" + in, 0},
		{"stdout", ">" + out, 0},
	} {
		wantErr, wantCode := shell(c.redirect, prog, c.stream)
		if wantCode != c.code {
			t.Fatalf("native %s %s: status %d, want %d (stderr %q)", c.stream, c.redirect, wantCode, c.code, wantErr)
		}
		trace := filepath.Join(t.TempDir(), "t.mtr")
		gotErr, gotCode := shell(c.redirect, os.Args[0], "run", "-q", "-o", trace, "--", prog, c.stream)
		if gotCode != wantCode || gotErr != wantErr {
			t.Errorf("memtrail run -- %s %s %s: status %d, stderr %q; natively %d, %q",
				filepath.Base(prog), c.stream, c.redirect, gotCode, gotErr, wantCode, wantErr)
		}
		if c.redirect == ">"+out {
			if b, _ := os.ReadFile(out); string(b) != "hello\n" {
				t.Errorf("memtrail run -- %s stdout >file: the file holds %q", filepath.Base(prog), b)
			}
		}
		if _, err := os.Stat(trace); err != nil {
			t.Errorf("%s %s: no trace: %v", c.stream, c.redirect, err)
		}
	}
}
