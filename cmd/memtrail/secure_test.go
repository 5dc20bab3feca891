package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestRunNothingRecorded runs scripts whose interpreter is setuid to
// another user, so that the loader runs it without the agent: memtrail run
// says that nothing was recorded and exits with the program's failure
// status, or 1 when the program succeeded; and it refuses to run the
// setuid program itself.
func TestRunNothingRecorded(t *testing.T) {
	uid, gid := fixture.OtherUser(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	code, err := os.ReadFile(fixture.Build(t, filepath.Join("..", "..", "internal", "record", "testdata", "echo.c")))
	if err != nil {
		t.Fatal(err)
	}
	suid := filepath.Join(dir, "suid-echo")
	os.WriteFile(suid, code, 0o755)
	if err := os.Chown(suid, uid, gid); err != nil {
		t.Fatal(err)
	}
	os.Chmod(suid, os.ModeSetuid|0o755)
	for _, c := range []struct {
		shebang string // "" runs suid itself
		code    int
		want    string
	}{
		{"#!" + suid + " 3\n", 3, "the agent was never loaded, so nothing was recorded and no trace was written"},
		{"#!" + suid + "\n", 1, "the agent was never loaded, so nothing was recorded and no trace was written"},
		{"", 1, suid + " is setuid: the loader ignores LD_PRELOAD for it, so nothing can be recorded"},
	} {
		prog := suid
		if c.shebang != "" {
			prog = filepath.Join(t.TempDir(), "script")
			os.WriteFile(prog, []byte(c.shebang), 0o755)
		}
		out := filepath.Join(t.TempDir(), "t.mtr")
		var stdout, stderr bytes.Buffer
		got, err := run([]string{"run", "-o", out, prog}, &stdout, &stderr)
		if got != c.code || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: status %d, error %v; want status %d and an error saying %q", c.shebang, got, err, c.code, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%q: a trace was written", c.shebang)
		}
	}
}
