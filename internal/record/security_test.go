package record_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/record"
)

// buildForger builds forgehello.c into a directory another user can
// reach, and returns its path.
func buildForger(t *testing.T) string {
	t.Helper()
	built := buildAgainstProtocol(t, "forgehello.c")
	dir, err := os.MkdirTemp("", "memtrail-forger-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	code, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "forgehello")
	if err := os.WriteFile(path, code, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// recorderSocket finds the socket of this process's recording in
// /proc/net/unix, as any local user can.
func recorderSocket(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("@memtrail-%d-", os.Getpid())
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 0 && strings.HasPrefix(fields[len(fields)-1], prefix) {
			return fields[len(fields)-1]
		}
	}
	t.Fatalf("no socket %s* in /proc/net/unix", prefix)
	return ""
}

// recordGated records gated.c, and runs attack while the program waits,
// with the recorder's socket and the program's pid.
func recordGated(t *testing.T, attack func(socket string, pid int)) (*record.Result, string) {
	t.Helper()
	prog := fixture.Build(t, src("gated.c"))
	agent := fixture.Agent(t)
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdinR.Close()
	defer stdinW.Close()
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdoutR.Close()
	type outcome struct {
		res *record.Result
		err error
	}
	done := make(chan outcome, 1)
	var log strings.Builder
	go func() {
		res, err := record.Run(record.Options{Args: []string{prog}, Output: filepath.Join(t.TempDir(), "trace.mtr"), AgentPath: agent,
			Stdin: stdinR, Stdout: stdoutW, Stderr: os.Stderr, Log: &log, Version: "test"})
		stdoutW.Close()
		done <- outcome{res, err}
	}()
	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "ready ")))
	if err != nil || perr != nil {
		t.Fatalf("the program said %q: %v", line, err)
	}
	if attack != nil {
		attack(recorderSocket(t), pid)
	}
	stdinW.WriteString("go\n")
	// Not a measure of speed: a bound that turns a program held up for
	// good into a failure rather than a test that never ends.
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatal(o.err)
		}
		return o.res, log.String()
	case <-time.After(2 * time.Minute):
		syscall.Kill(pid, syscall.SIGKILL)
		<-done
		t.Fatalf("the program was held up: the recording never ended\n%s", log.String())
	}
	return nil, ""
}

// forge runs the forger as cmd says and returns what it printed.
func forge(t *testing.T, what string, out []byte, err error) string {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v: %s", what, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestForeignHello performs the attack the checks of who connects (see
// server) are for: while root records a program, another user finds the
// recorder's socket and sends it a well-formed hello, once with the
// program's pid (which would replace the real recording and hold the
// program up for good) and once with its own (a fake process in the
// trace); and a process of root's own that the
// program did not start does the same. Each must be refused, and the
// recording must be what it is without them.
func TestForeignHello(t *testing.T) {
	fixture.OtherUser(t)
	forger := buildForger(t)
	want, _ := recordGated(t, nil)
	got, log := recordGated(t, func(socket string, pid int) {
		for _, target := range []string{strconv.Itoa(pid), "self"} {
			cmd := fixture.AsOtherUser(t, forger, socket, target)
			what := "another user's hello for pid " + target
			if out, err := cmd.Output(); forge(t, what, out, err) != "refused" {
				t.Errorf("%s: %s", what, out)
			}
		}
		what := "a hello from a process the program did not start"
		if out, err := exec.Command(forger, socket, strconv.Itoa(pid)).Output(); forge(t, what, out, err) != "refused" {
			t.Errorf("%s: %s", what, out)
		}
	})
	if got.Processes != 1 || got.Allocations != want.Allocations || got.Frees != want.Frees || got.BytesAllocated != want.BytesAllocated {
		t.Errorf("recorded %d processes, %d allocations, %d frees, %d bytes; without the forged hellos %d, %d, %d, %d",
			got.Processes, got.Allocations, got.Frees, got.BytesAllocated, want.Processes, want.Allocations, want.Frees, want.BytesAllocated)
	}
	if !strings.Contains(log, "refused a connection from process") {
		t.Errorf("memtrail did not say it refused the connections:\n%s", log)
	}
}

// TestHelloWithoutKey: a process of the recording itself, of the same
// user, that says hello without the run's key is refused.
func TestHelloWithoutKey(t *testing.T) {
	forger := buildForger(t)
	rec := recordArgs(t, "", forger, "env", "self")
	if rec.stdout != "refused\n" || rec.res.Processes != 1 {
		t.Errorf("a hello without the key: the program said %q; %d processes recorded\n%s", rec.stdout, rec.res.Processes, rec.stderr)
	}
	if !strings.Contains(rec.stderr, "has not the key of this run") {
		t.Errorf("memtrail did not say why it refused the hello:\n%s", rec.stderr)
	}
}

// TestForgedParent: a process of the recording, with the run's key, says
// hello as the fork child of a process that is not its parent. Welcomed,
// it took the place of that process's real child when it forked, and the
// real child was held back (and, once its ring was full, held up) until
// that process ended.
func TestForgedParent(t *testing.T) {
	forger := buildForger(t)
	// "; true" keeps the shell as the forger's parent (rather than exec).
	rec := recordArgs(t, "", "/bin/sh", "-c", `MEMTRAIL_FORGED_KEY=${MEMTRAIL_SOCK%%:*} "$0" env self fork-of=1; true`, forger)
	if rec.stdout != "refused\n" {
		t.Errorf("a hello as the fork child of process 1: the forger said %q\n%s", rec.stdout, rec.stderr)
	}
	if !strings.Contains(rec.stderr, "says its parent is process 1, which it is not") {
		t.Errorf("memtrail did not say why it refused the hello:\n%s", rec.stderr)
	}
}
