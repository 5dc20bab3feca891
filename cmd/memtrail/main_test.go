package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestMain runs the test binary as memtrail itself when
// MEMTRAIL_TEST_MAIN is set: the tests that need memtrail's own stdout and
// stderr, which the programs it runs share, run it so (memtrailCommand).
func TestMain(m *testing.M) {
	if os.Getenv("MEMTRAIL_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// memtrailCommand returns memtrail with args, as a process of its own.
func memtrailCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "MEMTRAIL_TEST_MAIN=1")
	return cmd
}

// runMemtrail runs memtrail with args as a process and returns its
// stdout, stderr and exit status.
func runMemtrail(t *testing.T, args ...string) (stdout, stderr string, code int) {
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

// TestOptionsAfterArguments gives every command that reads files its
// options after the files too, as users write them: the outcome is the
// same as with the options first. "--" still ends the options.
func TestOptionsAfterArguments(t *testing.T) {
	dir := t.TempDir()
	small := writeTrace(t, dir, "small.mtr", smallTrace)
	prog := fixture.Build(t, filepath.Join("..", "..", "internal", "stackdepth", "testdata", "chain.c"))
	for _, c := range []struct {
		before, after []string
		code          int
	}{
		{[]string{"report", "-view", "leaks", small}, []string{"report", small, "-view", "leaks"}, 0},
		{[]string{"report", "-json", "-view", "bins", small}, []string{"report", small, "-json", "-view=bins"}, 0},
		{[]string{"check", "-max-peak", "47B", small}, []string{"check", small, "-max-peak", "47B"}, 3},
		{[]string{"export", "-format", "collapsed", "-o", "-", small}, []string{"export", small, "-format", "collapsed", "-o", "-"}, 0},
		{[]string{"diff", "-json", small, small}, []string{"diff", small, "-json", small}, 0},
		{[]string{"stack", "-entry", "a", prog}, []string{"stack", prog, "-entry", "a"}, 0},
	} {
		var want, got, stderr bytes.Buffer
		if code, err := run(c.before, &want, &stderr); code != c.code {
			t.Fatalf("%q: status %d (%v), want %d", c.before, code, err, c.code)
		}
		if code, err := run(c.after, &got, &stderr); code != c.code {
			t.Errorf("%q: status %d (%v), want %d", c.after, code, err, c.code)
		}
		if want.Len() == 0 || !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("%q wrote\n%s\nbut %q wrote\n%s", c.after, got.String(), c.before, want.String())
		}
	}
	// view serves until stopped: the error on the trace to compare shows
	// that -compare was read after the trace.
	checkBadInput(t, []string{"view", small, "-compare", filepath.Join(dir, "old.mtr")}, 1, "old.mtr: no such file")
	// After "--", what looks like an option is a file name.
	checkBadInput(t, []string{"report", small, "--", "-view"}, 2, "needs exactly one trace file")
	checkBadInput(t, []string{"report", "--", "-view"}, 1, "-view: no such file")
	checkBadInput(t, []string{"report", small, "-top"}, 2, "flag needs an argument: -top")
}

// TestVersionOption asks for the version as most programs take it: the
// options --version and -version say what memtrail version does.
func TestVersionOption(t *testing.T) {
	var want bytes.Buffer
	if code, err := run([]string{"version"}, &want, &bytes.Buffer{}); code != 0 || err != nil {
		t.Fatalf("version: status %d, %v", code, err)
	}
	if want.String() != "memtrail "+version+"\n" {
		t.Errorf("version wrote %q", want.String())
	}
	for _, option := range []string{"--version", "-version"} {
		var got bytes.Buffer
		if code, err := run([]string{option}, &got, &bytes.Buffer{}); code != 0 || err != nil || got.String() != want.String() {
			t.Errorf("%s: status %d, %v, wrote %q; want %q", option, code, err, got.String(), want.String())
		}
	}
}

// TestRunCheckVerdictOnStderr records a program that writes to stdout
// with memtrail run -check and a budget it breaks: stdout holds the
// program's output alone, the verdict is on stderr.
func TestRunCheckVerdictOnStderr(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("testdata", "churn.c"))
	trace := filepath.Join(t.TempDir(), "churn.mtr")
	stdout, stderr, code := runMemtrail(t, "run", "-q", "-o", trace, "-check", "-max-in-use-at-exit", "0", "--", prog, "1000")
	if code != budgetBroken {
		t.Errorf("run -check: status %d, want %d\n%s", code, budgetBroken, stderr)
	}
	if want := "churn: 1000 allocations, 16 kept\n"; stdout != want {
		t.Errorf("run -check: stdout is %q, want the program's %q alone", stdout, want)
	}
	if want := "FAIL in use at exit"; !strings.Contains(stderr, want) {
		t.Errorf("run -check: no %q on stderr:\n%s", want, stderr)
	}
}

// TestRunStats records a program of 100,000 allocations with -stats: the
// numbers are written as the rest of memtrail writes them, with
// thousands separators, and the nouns agree with them.
func TestRunStats(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("testdata", "churn.c"))
	trace := filepath.Join(t.TempDir(), "churn.mtr")
	_, stderr, code := runMemtrail(t, "run", "-q", "-stats", "-o", trace, "--", prog)
	if code != 0 {
		t.Fatalf("run -stats: status %d\n%s", code, stderr)
	}
	stats := regexp.MustCompile(`memtrail: stats: (\d{1,3}(,\d{3})+) events from 1 process, 0 lost; .*; trace (\d{1,3}(,\d{3})+) bytes \(`)
	m := stats.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("run -stats: no line matching %s in\n%s", stats, stderr)
	}
	// The program's 100,000 allocations and 98,437 frees (1,563 blocks
	// are kept), at the least.
	if events, _ := strconv.ParseUint(strings.ReplaceAll(m[1], ",", ""), 10, 64); events < 198437 {
		t.Errorf("run -stats: %s events, want at least 198,437", m[1])
	}
}
