package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// runMemtrailOut runs memtrail with args as a process of its own, so that
// the programs it records share its stderr, and returns its stdout,
// stderr and exit status.
func runMemtrailOut(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := memtrailCommand(args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("memtrail %q: %v", args, err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// childPid is the pid forkexec.c says its child has.
func childPid(t *testing.T, stdout string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^child (\d+)$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no child pid in the program's output %q", stdout)
	}
	return m[1]
}

// TestRunStaticChildNotRecorded has a recorded (dynamic) process fork a
// child that execs a statically linked program, or a script whose
// interpreter is one: the loader never runs, so the agent cannot be in
// it. memtrail run's summary and the report's process table (and its
// JSON) name the child as not recorded, statically linked, rather than
// leave it out without a word. An exec that fails claims nothing.
func TestRunStaticChildNotRecorded(t *testing.T) {
	parent := fixture.Build(t, filepath.Join("testdata", "forkexec.c"))
	static := fixture.Build(t, filepath.Join("testdata", "static.c"), "-static", "-O0")
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	os.WriteFile(script, []byte("#!"+static+" -x\n"), 0o755)
	// A script of a script: the kernel follows the interpreter's #! too.
	script2 := filepath.Join(dir, "script2")
	os.WriteFile(script2, []byte("#! "+script+"\n"), 0o755)
	unexecutable := filepath.Join(dir, "unexecutable")
	code, _ := os.ReadFile(static)
	os.WriteFile(unexecutable, code, 0o644)
	for _, c := range []struct {
		exec   string
		status int
		static bool
	}{{static, 7, true}, {script, 7, true}, {script2, 7, true}, {unexecutable, 127, false}} {
		trace := filepath.Join(t.TempDir(), "t.mtr")
		stdout, stderr, status := runMemtrailOut(t, "run", "-o", trace, "--", parent, c.exec)
		if status != c.status {
			t.Fatalf("exec %s: status %d, want %d\n%s", c.exec, status, c.status, stderr)
		}
		pid := childPid(t, stdout)
		summary := fmt.Sprintf("memtrail: not recorded: statically linked: %s, exec'd by process %s (%s)\n", c.exec, pid, parent)
		if strings.Contains(stderr, summary) != c.static || strings.Contains(stderr, "not recorded") != c.static {
			t.Errorf("exec %s: memtrail run's messages should say %v that the child is not recorded (%q):\n%s", c.exec, c.static, summary, stderr)
		}
		table, _ := runOK(t, "report", "-processes", trace)
		row := regexp.MustCompile(`(?m)^\s*` + pid + `\b.*$`).FindString(table)
		if strings.HasSuffix(row, "exec'd a program not recorded: statically linked") != c.static {
			t.Errorf("exec %s: the process table's row of the child %s:\n%s", c.exec, pid, table)
		}
		out, _ := runOK(t, "report", "-processes", "-json", trace)
		var list struct {
			Processes []struct {
				PID uint64 `json:"pid"`
				End struct {
					How  string `json:"how"`
					Code int64  `json:"code"`
					Why  string `json:"why"`
				} `json:"end"`
			} `json:"processes"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range list.Processes {
			if fmt.Sprint(p.PID) != pid {
				continue
			}
			found = true
			want := "exited"
			if c.static {
				want = "exec_unrecorded"
			}
			if p.End.How != want || (p.End.Why == "statically_linked") != c.static {
				t.Errorf("exec %s: the child's end in JSON is %+v, want %s", c.exec, p.End, want)
			}
		}
		if !found {
			t.Errorf("exec %s: the child %s is not in the JSON list:\n%s", c.exec, pid, out)
		}
	}
}

// TestRunUnreachableRecorderNamed has a recorded process start a child
// that cannot reach the recorder (its MEMTRAIL_SOCK names a socket that
// does not exist): the agent's message names the child by pid and
// program, as many processes share one stderr.
func TestRunUnreachableRecorderNamed(t *testing.T) {
	parent := fixture.Build(t, filepath.Join("testdata", "forkexec.c"))
	child := fixture.Build(t, filepath.Join("testdata", "streams.c"))
	sock := "MEMTRAIL_SOCK=" + strings.Repeat("k", 32) + ":" + filepath.Join(t.TempDir(), "no-such-socket")
	stdout, stderr, status := runMemtrailOut(t, "run", "-q", "-o", filepath.Join(t.TempDir(), "t.mtr"), "--", parent, "-e", sock, child, "stdout")
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	want := fmt.Sprintf("memtrail: process %s (%s): the agent could not reach the recorder; this process is not recorded\n", childPid(t, stdout), child)
	if !strings.Contains(stderr, want) {
		t.Errorf("the agent's message should be %q:\n%s", want, stderr)
	}
}
