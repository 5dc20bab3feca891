package record_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/record"
	"github.com/memtrail/memtrail/internal/trace"
)

// setuidCopy copies the fixture prog into a directory of its own, owned by
// the other user and setuid to it: root running it gets the other user's
// euid, so the loader runs it in secure mode and drops LD_PRELOAD.
func setuidCopy(t *testing.T, prog string) string {
	t.Helper()
	uid, gid := fixture.OtherUser(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	code, err := os.ReadFile(prog)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "suid-"+filepath.Base(prog))
	if err := os.WriteFile(path, code, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSetuidRefused runs a program setuid to another user: memtrail says
// why it cannot record it, before running it.
func TestSetuidRefused(t *testing.T) {
	prog := setuidCopy(t, fixture.Build(t, src("echo.c")))
	out := filepath.Join(t.TempDir(), "t.mtr")
	_, err := record.Run(record.Options{Args: []string{prog}, Output: out, AgentPath: fixture.Agent(t)})
	if want := prog + " is setuid: the loader ignores LD_PRELOAD for it, so nothing can be recorded"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a trace was written")
	}
}

// TestNothingRecorded runs a script whose interpreter is setuid: the check
// before the run cannot see it, the program runs without the agent, and
// memtrail says that nothing was recorded rather than "0 allocations". The
// same script with an interpreter that is not setuid is recorded, so it is
// the secure mode that loses the agent.
func TestNothingRecorded(t *testing.T) {
	echo := fixture.Build(t, src("echo.c"))
	suid := setuidCopy(t, echo)
	for _, c := range []struct {
		interp string
		loaded bool
	}{{echo, true}, {suid, false}} {
		dir := t.TempDir()
		script := filepath.Join(dir, "script")
		os.WriteFile(script, []byte("#!"+c.interp+" 3\n"), 0o755)
		out := filepath.Join(dir, "t.mtr")
		res, err := record.Run(record.Options{Args: []string{script}, Output: out, AgentPath: fixture.Agent(t)})
		if c.loaded {
			if err != nil || res.Processes != 1 {
				t.Errorf("interpreter %s: %v, %+v; want one process recorded", c.interp, err, res)
			}
			continue
		}
		if !errors.Is(err, record.ErrNotLoaded) || !strings.HasPrefix(err.Error(), script+": the agent was never loaded") {
			t.Fatalf("interpreter %s: error %v, want %v", c.interp, err, record.ErrNotLoaded)
		}
		if res == nil || res.Program.ExitCode() != 3 {
			t.Errorf("result %+v: want the program's exit status 3", res)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("an empty trace was left at %s", out)
		}
	}
}

// TestExecUnrecorded has a recorded process exec a program setuid to
// another user, which the loader runs without the agent: the trace says
// that the process was replaced by a program memtrail could not record,
// rather than that it exited. The same exec of the program not setuid is
// recorded as a new image.
func TestExecUnrecorded(t *testing.T) {
	prog := fixture.Build(t, src("unsetexec.c"))
	echo := fixture.Build(t, src("echo.c"))
	suid := setuidCopy(t, echo)
	for _, c := range []struct {
		target string
		ends   []trace.EndHow
	}{{echo, []trace.EndHow{trace.EndExec, trace.EndExited}}, {suid, []trace.EndHow{trace.EndExecUnrecorded}}} {
		rec := recordArgs(t, "", prog, "exec", c.target)
		var ends []trace.EndHow
		for _, p := range rec.model.Processes {
			ends = append(ends, p.How)
		}
		if !slices.Equal(ends, c.ends) {
			t.Errorf("exec %s: processes ended %v, want %v", c.target, ends, c.ends)
		}
		if p := rec.model.Processes[0]; p.Summary.BytesAllocated != 111 {
			t.Errorf("exec %s: the program allocated %d bytes, want 111", c.target, p.Summary.BytesAllocated)
		}
		said := strings.Contains(rec.stderr, "exec'd a program without memtrail")
		if said != (c.target == suid) {
			t.Errorf("exec %s: memtrail's diagnostics:\n%s", c.target, rec.stderr)
		}
		if rec.res.Program.ExitCode() != 0 {
			t.Errorf("exec %s: exit status %d, want the exec'd program's 0", c.target, rec.res.Program.ExitCode())
		}
	}
}
