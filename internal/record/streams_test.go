package record_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestClosedStderrKeepsAgentQuiet starts memtrail with stderr closed, so
// that the program starts with it closed too and the file it opens first
// takes fd 2; then kills the recorder, so that the agent in the program
// has something to say ("the recorder is gone"). It must not say it into
// the program's file, which holds only what the program wrote.
func TestClosedStderrKeepsAgentQuiet(t *testing.T) {
	bin := buildMemtrail(t)
	prog := fixture.Build(t, src("closedstderr.c"))
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command("/bin/sh", "-c", `exec "$@" 2>&-`, "sh", bin, "run", "-o", filepath.Join(t.TempDir(), "t.mtr"), "--", prog, out)
	// A pipe of the test's own rather than StdoutPipe: memtrail must be
	// reaped (Wait) while the program still writes to it, or the agent
	// would take the zombie for a live recorder.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd.Stdout = pw
	err = cmd.Start()
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(pr)
	line, _ := r.ReadString('\n')
	if line != "ready\n" {
		cmd.Wait()
		t.Fatalf("read %q: the program did not start with fd 2 closed (status %v)", line, cmd.ProcessState)
	}
	cmd.Process.Kill()
	cmd.Wait()
	// The program holds the pipe until it ends.
	io.Copy(io.Discard, r)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "finished\n" {
		t.Errorf("the program's file, on its fd 2, holds %q; want only its own \"finished\\n\"", b)
	}
}
