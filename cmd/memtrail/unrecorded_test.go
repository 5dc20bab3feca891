package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

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
		stdout, stderr, status := runMemtrail(t, "run", "-o", trace, "--", parent, c.exec)
		if status != c.status {
			t.Fatalf("exec %s: status %d, want %d\n%s", c.exec, status, c.status, stderr)
		}
		checkNotRecorded(t, "exec "+c.exec, spawnedChild{pid: childPid(t, stdout), exe: parent, program: c.exec}, c.static, stderr, trace)
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
	stdout, stderr, status := runMemtrail(t, "run", "-q", "-o", filepath.Join(t.TempDir(), "t.mtr"), "--", parent, "-e", sock, child, "stdout")
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	want := fmt.Sprintf("memtrail: process %s (%s): the agent could not reach the recorder; this process is not recorded\n", childPid(t, stdout), child)
	if !strings.Contains(stderr, want) {
		t.Errorf("the agent's message should be %q:\n%s", want, stderr)
	}
}

// parentPid is the pid spawn.c says it has.
func parentPid(t *testing.T, stdout string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^parent (\d+)$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no parent pid in the program's output %q", stdout)
	}
	return m[1]
}

// spawnedChild is what memtrail says of a child that a recorded process
// started, in a recording with the given messages and trace.
type spawnedChild struct {
	pid, ppid string // ppid "" to take any
	// exe is the program of the process that started it, which the
	// child ran until its exec, and program the static program it
	// started ("" to take any).
	exe, program string
}

// checkNotRecorded checks that memtrail run's messages, the report's
// process table and its JSON say of child c that it was not recorded
// because it is statically linked (static), or that it ran and was
// recorded.
func checkNotRecorded(t *testing.T, name string, c spawnedChild, static bool, stderr, trace string) {
	t.Helper()
	exe, program := regexp.QuoteMeta(c.exe), regexp.QuoteMeta(c.program)
	if c.exe == "" {
		exe = `[^)]+`
	}
	if c.program == "" {
		program = `.*`
	}
	summary := regexp.MustCompile(`(?m)^memtrail: not recorded: statically linked: ` + program + `, exec'd by process ` + c.pid + ` \(` + exe + `\)$`)
	if summary.MatchString(stderr) != static || strings.Contains(stderr, "not recorded") != static {
		t.Errorf("%s: memtrail run's messages should say %v that child %s is not recorded (%s):\n%s", name, static, c.pid, summary, stderr)
	}
	table, _ := runOK(t, "report", "-processes", trace)
	row := regexp.MustCompile(`(?m)^\s*` + c.pid + `\b.*$`).FindString(table)
	if row == "" || strings.HasSuffix(row, "exec'd a program not recorded: statically linked") != static {
		t.Errorf("%s: the process table's row of child %s:\n%s", name, c.pid, table)
	}
	out, _ := runOK(t, "report", "-processes", "-json", trace)
	var list struct {
		Processes []struct {
			PID  uint64 `json:"pid"`
			PPID uint64 `json:"ppid"`
			End  struct {
				How string `json:"how"`
				Why string `json:"why"`
			} `json:"end"`
		} `json:"processes"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range list.Processes {
		if fmt.Sprint(p.PID) != c.pid {
			continue
		}
		found = true
		if c.ppid != "" && fmt.Sprint(p.PPID) != c.ppid {
			t.Errorf("%s: child %s's parent in JSON is %d, want %s", name, c.pid, p.PPID, c.ppid)
		}
		if (p.End.How == "exec_unrecorded" && p.End.Why == "statically_linked") != static {
			t.Errorf("%s: child %s's end in JSON is %+v", name, c.pid, p.End)
		}
	}
	if !found {
		t.Errorf("%s: child %s is not in the JSON list:\n%s", name, c.pid, out)
	}
}

// TestRunSpawnedStaticNotRecorded has a recorded (dynamic) process start
// a statically linked program with posix_spawn, or a script whose
// interpreter is one with posix_spawnp (found in PATH), as Rust's Command
// does, or from a vfork child, as make and Python's subprocess do: libc's
// clone and exec, or a child in its parent's memory, with no fork the
// agent sees and no hello from the child. memtrail names the child as
// not recorded, statically linked, with its parent, as it does a fork
// child that execs one. A spawn or exec that fails claims nothing (a
// vfork child may try several programs), and a dynamic program spawned
// is recorded as before. Two vfork children one after the other, with
// nothing in between that the agent sees, are both named.
func TestRunSpawnedStaticNotRecorded(t *testing.T) {
	parent := fixture.Build(t, filepath.Join("testdata", "spawn.c"))
	static := fixture.Build(t, filepath.Join("testdata", "static.c"), "-static", "-O0")
	dynamic := fixture.Build(t, filepath.Join("testdata", "streams.c"))
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "script"), []byte("#!"+static+" -x\n"), 0o755)
	// Statically linked, but not executable: its exec fails.
	unexecutable := filepath.Join(dir, "unexecutable")
	code, _ := os.ReadFile(static)
	os.WriteFile(unexecutable, code, 0o644)
	for _, c := range []struct {
		name   string
		args   []string
		status int
		static bool
	}{
		{"posix_spawn static", []string{static}, 7, true},
		{"posix_spawnp script", []string{"-p", dir, "script"}, 7, true},
		{"posix_spawn no such file", []string{filepath.Join(dir, "none")}, 127, false},
		{"posix_spawn unexecutable", []string{unexecutable}, 127, false},
		{"posix_spawn dynamic", []string{dynamic, "stdout"}, 0, false},
		{"vfork static", []string{"-v", unexecutable, static}, 7, true},
		{"vfork script", []string{"-v", filepath.Join(dir, "script")}, 7, true},
		{"vfork unexecutable", []string{"-v", filepath.Join(dir, "none"), unexecutable}, 127, false},
		{"vfork dynamic", []string{"-v", dynamic, "--", dynamic, "stdout"}, 0, false},
	} {
		trace := filepath.Join(t.TempDir(), "t.mtr")
		stdout, stderr, status := runMemtrail(t, append([]string{"run", "-o", trace, "--", parent}, c.args...)...)
		if status != c.status {
			t.Fatalf("%s: status %d, want %d\n%s", c.name, status, c.status, stderr)
		}
		if c.status == 127 {
			if strings.Contains(stderr, "not recorded") {
				t.Errorf("%s: a spawn that failed should claim nothing:\n%s", c.name, stderr)
			}
			continue
		}
		checkNotRecorded(t, c.name, spawnedChild{pid: childPid(t, stdout), ppid: parentPid(t, stdout), exe: parent}, c.static, stderr, trace)
		if c.args[0] == "-v" {
			m := regexp.MustCompile(`(?m)^child2 (\d+)$`).FindStringSubmatch(stdout)
			if m == nil {
				t.Fatalf("%s: no second child in the program's output %q", c.name, stdout)
			}
			checkNotRecorded(t, c.name+", second child", spawnedChild{pid: m[1], ppid: parentPid(t, stdout), exe: parent}, c.static, stderr, trace)
		}
	}
}

// TestRunPythonSpawnedStaticNotRecorded has Python's subprocess start a
// statically linked program: from a vfork child, as it does by default,
// or with posix_spawn, which it uses when told not to close file
// descriptors.
func TestRunPythonSpawnedStaticNotRecorded(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	static := fixture.Build(t, filepath.Join("testdata", "static.c"), "-static", "-O0")
	for _, closeFds := range []string{"True", "False"} {
		script := `import os, subprocess, sys
p = subprocess.Popen([sys.argv[1]], close_fds=` + closeFds + `)
print("child", p.pid, flush=True)
print("parent", os.getpid(), flush=True)
sys.exit(p.wait())
`
		trace := filepath.Join(t.TempDir(), "t.mtr")
		stdout, stderr, status := runMemtrail(t, "run", "-o", trace, "--", python, "-c", script, static)
		if status != 7 {
			t.Fatalf("close_fds=%s: status %d, want 7\n%s", closeFds, status, stderr)
		}
		checkNotRecorded(t, "python, close_fds="+closeFds, spawnedChild{pid: childPid(t, stdout), ppid: parentPid(t, stdout)}, true, stderr, trace)
	}
}
