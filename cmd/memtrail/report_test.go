package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/trace/tracetext"
)

// A small trace: one process that runs 10 ms, allocates twice from main
// and frees once.
const smallTrace = `info time-unit=1000 command=[./prog]
process id=1 pid=100 time=0 exe=/bin/prog args=[prog] cwd=/tmp
thread process=1 index=1 tid=100
object id=1 path=/bin/prog
module process=1 id=1 object=1 base=0x400000
string id=1 value=main
symbol object=1 offset=0x100 frames=1:0:0
node process=1 id=1 parent=0 module=1 offset=0x100
alloc process=1 thread=1 time=1000000 api=malloc addr=0x1000 size=16 stack=1
alloc process=1 thread=1 time=2000000 api=malloc addr=0x2000 size=32 stack=1
free process=1 thread=1 time=3000000 api=free addr=0x1000 stack=1
process-end id=1 time=10000000 how=exited code=0
end time=10000000 events=3
`

// Only frees, of addresses never allocated.
const onlyFrees = `info time-unit=1000 command=[./prog]
process id=1 pid=100 time=0 exe=/bin/prog args=[prog]
thread process=1 index=1 tid=100
free process=1 thread=1 time=1000000 api=free addr=0x1000 stack=0
free process=1 thread=1 time=2000000 api=free addr=0x1000 stack=0
process-end id=1 time=10000000 how=exited code=0
end time=10000000 events=2
`

func writeTrace(t *testing.T, dir, name, text string) string {
	t.Helper()
	data, err := tracetext.Encode(text)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReportBadInput runs report on mistakes of every kind: each must end
// with a non-zero status and one line saying what is wrong.
func TestReportBadInput(t *testing.T) {
	dir := t.TempDir()
	small := writeTrace(t, dir, "small.mtr", smallTrace)
	empty := filepath.Join(dir, "empty.mtr")
	os.WriteFile(empty, nil, 0o644)
	notTrace := filepath.Join(dir, "notes.txt")
	os.WriteFile(notTrace, []byte("hello, this is not a trace\n"), 0o644)
	headerOnly := filepath.Join(dir, "header.mtr")
	os.WriteFile(headerOnly, []byte("memtrail\x01\x00\x00\x00\x00\x00\x00\x00"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string // in the error
	}{
		{[]string{"report", "-view", "flames", small}, 2, `unknown view "flames"`},
		{[]string{"report", "-cost", "money", small}, 2, `unknown cost "money"`},
		{[]string{"report", "-sort", "color", small}, 2, `unknown order "color"`},
		{[]string{"report", "-colour", small}, 2, "flag provided but not defined: -colour"},
		{[]string{"report", "-at", "5ms", "-from", "1ms", small}, 2, "-at cannot go with -from or -to"},
		{[]string{"report", "-from", "5ms", "-to", "1ms", small}, 2, "-to 1ms is before -from 5ms"},
		{[]string{"report", "-from", "-5ms", small}, 2, "is negative"},
		{[]string{"report", "-at", "0", small}, 2, "must end after the start"},
		{[]string{"report", "-from", "1h", small}, 1, "the window starts 3600 s after the start of process 100, which ran 10.0 ms"},
		{[]string{"report", "-thread", "0", small}, 2, "a thread is a number from 1"},
		{[]string{"report", "-thread", "one", small}, 2, "a thread is a number from 1"},
		{[]string{"report", "-function", "(", small}, 2, "-function: error parsing regexp"},
		{[]string{"report", "-top", "0", small}, 2, "must be at least 1"},
		{[]string{"report", "-view", "objects", "-top", "100000000", small}, 2, "-top 100000000 is out of range"},
		{[]string{"report", "-frames", "5000", small}, 2, "-frames 5000 is out of range"},
		{[]string{"report", "-pid", "7", small}, 1, "process 7 is not in this trace (processes: 100)"},
		{[]string{"report", filepath.Join(dir, "missing.mtr")}, 1, "no such file"},
		{[]string{"report", empty}, 1, "not a memtrail trace"},
		{[]string{"report", notTrace}, 1, "not a memtrail trace"},
		{[]string{"report", headerOnly}, 1, "the trace holds no process"},
		{[]string{"report", small, small}, 2, "needs exactly one trace file"},
		{[]string{"report", "-html", filepath.Join(dir, "page.html"), "-view", "leaks", small}, 2, "-html goes with -pid only, not with -view"},
		{[]string{"report", "-html", filepath.Join(dir, "no", "page.html"), small}, 1, "no such file or directory"},
		{[]string{"report", "-html", filepath.Join(dir, "page.html"), empty}, 1, "not a memtrail trace"},
		{[]string{"report", "-html", filepath.Join(dir, "page.html"), "-pid", "7", small}, 1, "process 7 is not in this trace"},
		// view reads the trace before it serves anything.
		{[]string{"view", empty}, 1, "not a memtrail trace"},
		{[]string{"view", filepath.Join(dir, "missing.mtr")}, 1, "no such file"},
		{[]string{"view", headerOnly}, 1, "holds no process"},
		{[]string{"view", "-addr", "127.0.0.1:99999", small}, 1, "cannot serve on 127.0.0.1:99999"},
		{[]string{"view"}, 2, "needs exactly one trace file"},
		{[]string{"view", "-source-dir", filepath.Join(dir, "no-such-dir"), small}, 2, "-source-dir: lstat"},
		{[]string{"view", "-source-dir", small, small}, 2, "is not a directory"},
	} {
		t.Run(strings.Join(c.args[1:], " "), func(t *testing.T) { checkBadInput(t, c.args, c.code, c.want) })
	}
}

// checkBadInput runs the command line args, a mistake: it must end with
// the exit status code and an error of one line that says want.
func checkBadInput(t *testing.T, args []string, code int, want string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	got, err := run(args, &stdout, &stderr)
	if got != code {
		t.Errorf("exit status %d, want %d (error: %v)", got, code, err)
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one saying %q", err, want)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error of several lines: %q", err)
	}
}

// TestReportViews runs every view of report, as text and JSON, on a
// small trace and on one with only frees of unknown addresses: all must
// work.
func TestReportViews(t *testing.T) {
	dir := t.TempDir()
	traces := []string{writeTrace(t, dir, "small.mtr", smallTrace), writeTrace(t, dir, "frees.mtr", onlyFrees)}
	for _, tr := range traces {
		for _, v := range viewList() {
			for _, extra := range [][]string{nil, {"-json"}, {"-at", "2ms"}, {"-from", "1500us", "-to", "2500us", "-thread", "1"}} {
				args := append(append([]string{"report", "-view", v}, extra...), tr)
				var stdout, stderr bytes.Buffer
				if code, err := run(args, &stdout, &stderr); code != 0 || err != nil {
					t.Errorf("%v: status %d, %v", args, code, err)
				}
				if stdout.Len() == 0 {
					t.Errorf("%v wrote nothing", args)
				}
			}
		}
	}
}

// TestReportEscapesNames records a program whose source file name holds
// terminal escape sequences (from a #line directive), run with an
// argument that holds one too: no text that memtrail writes of it, in any
// view of report, in check or in stack, holds a control character but the
// newline; the names show their escapes instead. JSON keeps them exact.
func TestReportEscapesNames(t *testing.T) {
	const file = "evil\x1b]0;pwned\x07\x1b[31m.c"
	const escaped = `evil\x1b]0;pwned\x07\x1b[31m.c`
	prog := fixture.Build(t, filepath.Join("testdata", "evil.c"))
	trace := filepath.Join(t.TempDir(), "evil.mtr")
	var stdout, stderr bytes.Buffer
	if code, err := run([]string{"run", "-q", "-o", trace, "--", prog, "\x1b[2J"}, &stdout, &stderr); code != 0 || err != nil {
		t.Fatalf("run: status %d, %v\n%s", code, err, stderr.String())
	}
	commands := [][]string{
		{"check", "-max-peak", "1", "-max-in-use-at-exit", "0", trace},
		{"stack", prog},
		{"stack", prog, trace},
		{"diff", trace, trace},
	}
	for _, v := range viewList() {
		commands = append(commands, []string{"report", "-view", v, trace})
	}
	for _, args := range commands {
		stdout.Reset()
		stderr.Reset()
		if code, err := run(args, &stdout, &stderr); err != nil {
			t.Fatalf("%q: status %d, %v", args, code, err)
		}
		out := stdout.String() + stderr.String()
		if i := strings.IndexFunc(out, func(r rune) bool { return r < 0x20 && r != '\n' || r >= 0x7f && r <= 0x9f }); i >= 0 {
			t.Errorf("%q wrote the control character %q:\n%s", args, out[i], out)
		}
		if (args[0] == "check" || args[0] == "stack" || args[2] == "summary") && !strings.Contains(out, escaped) {
			t.Errorf("%q does not write the file name as %s:\n%s", args, escaped, out)
		}
	}
	stdout.Reset()
	run([]string{"report", trace}, &stdout, &stderr)
	if want := prog + ` $'\x1b[2J'`; !strings.Contains(stdout.String(), want) {
		t.Errorf("report does not write the command line as %s:\n%s", want, stdout.String())
	}

	stdout.Reset()
	if code, err := run([]string{"report", "-json", trace}, &stdout, &stderr); code != 0 || err != nil {
		t.Fatalf("report -json: status %d, %v", code, err)
	}
	var rep any
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report -json: %v", err)
	}
	files, args := 0, rep.(map[string]any)["args"].([]any)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if f, ok := v["file"].(string); ok && strings.Contains(f, "evil") {
				if !strings.HasSuffix(f, "/"+file) {
					t.Errorf("report -json: file %q, want one ending in %q", f, file)
				}
				files++
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(rep)
	if files == 0 || len(args) != 2 || args[1] != "\x1b[2J" {
		t.Errorf("report -json: %d frames in the evil file, args %q:\n%s", files, args, stdout.String())
	}
}
