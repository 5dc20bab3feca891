package record_test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/record"
	"github.com/memtrail/memtrail/internal/trace"
)

// TestScribbledRegion records scribble.c, a program that damages the
// buffer memtrail shares with it in each way a wild write (or a hostile
// process of the tree) can: the ring's indexes, a record's length, random
// bytes, counts that size what follows. The recorder must return, the
// program must run to its own exit status (not be held up, nor killed),
// the trace must say that process's history was cut by damage, and its
// fork child, which did not scribble, must be recorded exactly.
func TestScribbledRegion(t *testing.T) {
	prog := buildAgainstProtocol(t, "scribble.c")
	// Under valgrind the program finds no region to damage, and stops
	// after its child has ended (valgrind prints the child first).
	vg := fixture.Valgrind(t, prog)
	if len(vg) != 2 {
		t.Fatalf("valgrind saw %d processes", len(vg))
	}
	vgChild := vg[0]
	for _, mode := range []string{"indexes", "length0", "lengthhuge", "random", "module", "deepest", "node", "seqhole", "pointers"} {
		t.Run(mode, func(t *testing.T) {
			rec := recordScribble(t, prog, mode)
			if rec.res.Program.ExitCode() != 3 || rec.stdout != "done\n" {
				t.Errorf("the program exited with %d and said %q; it exits with 3 after \"done\"\n%s",
					rec.res.Program.ExitCode(), rec.stdout, rec.stderr)
			}
			if len(rec.model.Processes) != 2 {
				t.Fatalf("%d processes recorded, want the program and its child\n%s", len(rec.model.Processes), rec.stderr)
			}
			parent, child := rec.model.Processes[0], rec.model.Processes[1]
			want := fmt.Sprintf("pid %d: %s", parent.PID, trace.LostRegionDamaged)
			found := false
			for _, w := range rec.model.AllWarnings() {
				found = found || strings.HasPrefix(w, want)
			}
			if !found {
				t.Errorf("no warning %q...; the warnings are %q\n%s", want, rec.model.AllWarnings(), rec.stderr)
			}
			if !strings.Contains(rec.stderr, "damaged memtrail's buffer") {
				t.Errorf("memtrail did not say the program damaged its buffer:\n%s", rec.stderr)
			}
			// What came before the damage is the program's: the block
			// it had before the fork, and the one after.
			if s := parent.Summary; s.BytesAllocated < 5000 || s.InvalidFrees != 0 {
				t.Errorf("the program: %d bytes allocated, %d invalid frees; want at least 5000 and none", s.BytesAllocated, s.InvalidFrees)
			}
			if !child.Forked || child.Parent != parent.ID || child.How != trace.EndExited || child.Code != 5 || child.Lost != 0 {
				t.Errorf("the child: forked %v, of process %d (want %d), ended %v %d (want exited 5), %d lost",
					child.Forked, child.Parent, parent.ID, child.How, child.Code, child.Lost)
			}
			sameAsValgrind(t, child, vgChild)
		})
	}
}

// TestModuleNamesFifo: a module record that names a FIFO (or a device)
// rather than the file of a library: the recorder opened it, to symbolize
// the module's frames, and waited for good for a writer, holding the
// program up.
func TestModuleNamesFifo(t *testing.T) {
	prog := buildAgainstProtocol(t, "scribble.c")
	rec := recordScribble(t, prog, "fifo", filepath.Join(t.TempDir(), "fifo"))
	if rec.res.Program.ExitCode() != 3 || rec.stdout != "done\n" || len(rec.model.Processes) != 2 {
		t.Errorf("the program exited with %d and said %q, %d processes recorded; want 3, \"done\", 2\n%s",
			rec.res.Program.ExitCode(), rec.stdout, len(rec.model.Processes), rec.stderr)
	}
}

// buildAgainstProtocol builds the fixture testdata/name against the
// agent's protocol.h, as a program that writes memtrail's buffer or
// socket itself must be.
func buildAgainstProtocol(t *testing.T, name string) string {
	t.Helper()
	csrc, err := filepath.Abs(filepath.Join("..", "agent", "csrc"))
	if err != nil {
		t.Fatal(err)
	}
	header, err := os.ReadFile(filepath.Join(csrc, "protocol.h"))
	if err != nil {
		t.Fatal(err)
	}
	// The fixture cache knows the source, not the header: the header's
	// hash among the flags rebuilds the fixture when the protocol changes.
	sum := sha256.Sum256(header)
	return fixture.Build(t, src(name), "-g", "-O0", "-I", csrc, fmt.Sprintf("-DPROTOCOL_SUM=%x", sum[:8]))
}

// recordScribble records prog mode. A recording that does not end is a
// failure, not a test that waits for go test's own timeout.
func recordScribble(t *testing.T, prog, mode string, args ...string) recording {
	t.Helper()
	dir := t.TempDir()
	out, _ := os.Create(filepath.Join(dir, "stdout"))
	defer out.Close()
	var log strings.Builder
	type outcome struct {
		res *record.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := record.Run(record.Options{Args: append([]string{prog, mode}, args...), Output: filepath.Join(dir, "trace.mtr"),
			AgentPath: fixture.Agent(t), Stdout: out, Stderr: out, Log: &log, Version: "test", LeakScan: true, LeakOrigins: true})
		done <- outcome{res, err}
	}()
	var o outcome
	// Not a measure of speed: a bound that turns a recorder or a program
	// held up for good into a failure.
	select {
	case o = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the recording of %s never ended\n%s", mode, log.String())
	}
	if o.err != nil {
		t.Fatalf("recording %s: %v\n%s", mode, o.err, log.String())
	}
	m, _, err := analysis.AnalyzeFile(o.res.Path, analysis.Options{})
	if err != nil {
		t.Fatalf("reading the trace: %v", err)
	}
	stdout, _ := os.ReadFile(out.Name())
	return recording{res: o.res, model: m, stdout: string(stdout), stderr: log.String()}
}
