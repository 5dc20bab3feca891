package report_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/report"
	"github.com/memtrail/memtrail/internal/trace"
	"github.com/memtrail/memtrail/internal/trace/tracetext"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata with the reports made now")

// goldens are the reports compared with files of testdata, named after
// their input, their options and their format:
// testdata/INPUT[.OPTIONS].FORMAT.golden.
var goldens = []struct {
	input string // testdata/INPUT.txt, or one of the inputs made by input
	opts  report.Options
}{
	{"widget", report.Options{}},
	{"widget-10000", report.Options{}},
	{"widget-damaged", report.Options{}},
	{"server", report.Options{}},
	{"server", report.Options{PID: 301}},
	{"server", report.Options{PID: 302}},
	{"server", report.Options{Top: 1, Frames: 3}},
	{"recurse", report.Options{}},
}

func TestGolden(t *testing.T) {
	for _, g := range goldens {
		m := input(t, g.input)
		for _, format := range []struct {
			name  string
			write func(io.Writer, *analysis.Model, report.Options) error
		}{{"text", report.Text}, {"json", report.JSON}} {
			name := g.input + optionsSuffix(g.opts) + "." + format.name
			t.Run(name, func(t *testing.T) {
				var out bytes.Buffer
				if err := format.write(&out, m, g.opts); err != nil {
					t.Fatal(err)
				}
				if format.name == "json" && !json.Valid(out.Bytes()) {
					t.Fatalf("not valid JSON:\n%s", out.Bytes())
				}
				compareGolden(t, filepath.Join("testdata", name+".golden"), out.String())
			})
		}
	}
}

func optionsSuffix(o report.Options) string {
	var s string
	if o.PID != 0 {
		s += fmt.Sprintf(".pid=%d", o.PID)
	}
	if o.Top != 0 {
		s += fmt.Sprintf(".top=%d", o.Top)
	}
	if o.Frames != 0 {
		s += fmt.Sprintf(".frames=%d", o.Frames)
	}
	return s
}

func compareGolden(t *testing.T, file, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("report differs from %s (-want +got; go test -update rewrites it):\n%s",
			file, lineDiff(string(want), got))
	}
}

// input returns the model of a test input: a trace of testdata in text
// form, or one made from such a trace.
func input(t *testing.T, name string) *analysis.Model {
	t.Helper()
	switch name {
	case "widget-10000":
		return analyze(t, encode(t, scaledWidgets(t, 10000)))
	case "widget-damaged":
		return analyze(t, damaged(t, readInput(t, "widget")))
	}
	return analyze(t, encode(t, readInput(t, name)))
}

func readInput(t *testing.T, name string) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("testdata", name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

func encode(t *testing.T, text string) []byte {
	t.Helper()
	data, err := tracetext.Encode(text)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func analyze(t *testing.T, data []byte) *analysis.Model {
	t.Helper()
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	m, err := analysis.Analyze(r, analysis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// damaged writes a trace in blocks of a few records and damages the one
// holding the fourth allocation, so that the trace loses some of its
// events.
func damaged(t *testing.T, text string) []byte {
	t.Helper()
	recs, err := tracetext.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, *recs[0].Info)
	if err != nil {
		t.Fatal(err)
	}
	w.BlockSize, w.Uncompressed = 40, true
	var allocs int
	for _, rec := range recs[1:] {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if rec.Kind == trace.KindAlloc {
			if allocs++; allocs == 4 {
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				damageLastBlock(buf.Bytes())
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// damageLastBlock changes a byte of the last block of a trace file so that
// its checksum no longer matches.
func damageLastBlock(data []byte) {
	const fileHeaderSize, blockHeaderSize = 16, 20
	last := fileHeaderSize
	for off := fileHeaderSize; off < len(data); off += blockHeaderSize + int(binary.LittleEndian.Uint32(data[off+8:])) {
		last = off
	}
	data[last+blockHeaderSize] ^= 0xff
}

// scaledWidgets returns the widget trace of testdata with n widgets
// instead of 12. Widget i is red if i*7919 mod n < 0.5019n: 5,019 of
// 10,000 are, as in mprof's paper.
func scaledWidgets(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	text := strings.ReplaceAll(readInput(t, "widget"), "[./widget 12]", fmt.Sprintf("[./widget %d]", n))
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, "alloc ") && !strings.HasPrefix(line, "free ") && !strings.HasPrefix(line, "end ") &&
			!strings.HasPrefix(line, "process-end ") {
			b.WriteString(line)
		}
	}
	red := func(i int) bool { return i*7919%n < n*5019/10000 }
	addr := func(i int) int { return 0x5555555592a0 + i*0xe0 }
	for i := range n {
		stack := 6
		if red(i) {
			stack = 9
		}
		fmt.Fprintf(&b, "alloc process=1 thread=1 time=%d api=malloc addr=%#x size=204 stack=%d\n", 1100000+i*10, addr(i), stack)
	}
	for i := range n {
		if !red(i) {
			fmt.Fprintf(&b, "free process=1 thread=1 time=%d api=free addr=%#x stack=11\n", 1200000+i*10, addr(i))
		}
	}
	b.WriteString("process-end id=1 time=1300000 how=exited code=0\nend time=1300000 events=0\n")
	return b.String()
}

func TestUnknownPID(t *testing.T) {
	m := input(t, "server")
	for _, write := range []func(io.Writer, *analysis.Model, report.Options) error{report.Text, report.JSON} {
		err := write(io.Discard, m, report.Options{PID: 123})
		if want := "process 123 is not in this trace (processes: 300, 301, 302)"; err == nil || err.Error() != want {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}

func TestNoProcess(t *testing.T) {
	m := analyze(t, encode(t, "info time-unit=1\nend time=0 events=0\n"))
	if err := report.Text(io.Discard, m, report.Options{}); err == nil {
		t.Error("no error for a trace without processes")
	}
}

// lineDiff shows the lines of want and got that differ, as a minimal diff
// would: good enough for reports of a few hundred lines.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	lcs := make([][]int, len(w)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(g)+1)
	}
	for i := len(w) - 1; i >= 0; i-- {
		for j := len(g) - 1; j >= 0; j-- {
			if w[i] == g[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var b strings.Builder
	i, j := 0, 0
	for i < len(w) || j < len(g) {
		switch {
		case i < len(w) && j < len(g) && w[i] == g[j]:
			fmt.Fprintf(&b, "  %s\n", w[i])
			i, j = i+1, j+1
		case j < len(g) && (i == len(w) || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&b, "+ %s\n", g[j])
			j++
		default:
			fmt.Fprintf(&b, "- %s\n", w[i])
			i++
		}
	}
	return b.String()
}

// A process whose image is replaced by exec is reported as its last image,
// whether it is asked for by PID or as the first process.
func TestPIDFollowsExec(t *testing.T) {
	m := analyze(t, encode(t, `
process id=1 pid=100 exe=/bin/sh args=[sh -c ./prog]
process-end id=1 time=10 how=exec
process id=2 pid=100 time=10 exe=/opt/prog args=[./prog]
process id=3 pid=101 ppid=100 parent=2 time=20 exe=/opt/prog args=[./prog]
process-end id=3 time=30 how=exec
process id=4 pid=101 ppid=100 parent=2 time=30 exe=/bin/true args=[true]
process-end id=4 time=40 how=exited
process-end id=2 time=50 how=exited
end time=50 events=0
`))
	for _, tt := range []struct {
		pid  uint64
		want string
	}{
		{0, "./prog  (/opt/prog)"},
		{100, "./prog  (/opt/prog)"},
		{101, "true  (/bin/true)"},
	} {
		var out strings.Builder
		if err := report.Text(&out, m, report.Options{PID: tt.pid}); err != nil {
			t.Fatal(err)
		}
		if first, _, _ := strings.Cut(out.String(), "\n"); first != tt.want {
			t.Errorf("pid %d: report on %q, want %q", tt.pid, first, tt.want)
		}
	}
}

// TestStackUsage reads .su files and shows their sizes next to the frames
// of a deepest stack sampled at a heap event, which has none of its own.
func TestStackUsage(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "server.su"), []byte("server.c:30:6:cache_put\t9000\tstatic\nserver.c:40:5:main\t48\tstatic\nserver.c:50:5:worker\t64\tdynamic\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "x.su"), []byte("x.cc:3:5:ns::f(int)\t16\tstatic\n"), 0o644)
	usage, err := report.ReadStackUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := report.StackUsage{"cache_put": 9000, "main": 48, "ns::f(int)": 16}
	if !maps.Equal(usage, want) {
		t.Errorf("read %v, want %v", usage, want)
	}
	var out bytes.Buffer
	if err := report.Text(&out, input(t, "cache"), report.Options{StackUsage: usage}); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"      8.79 KiB*  cache_put (server.c:32)", "      48 bytes*  main (server.c:41)", "(* each frame's size as gcc -fstack-usage gives it"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the report has no line %q:\n%s", line, out.String())
		}
	}

	os.WriteFile(filepath.Join(dir, "bad.su"), []byte("not a line\n"), 0o644)
	if _, err := report.ReadStackUsage(dir); err == nil || !strings.Contains(err.Error(), "bad.su:1: not a -fstack-usage line") {
		t.Errorf("a bad .su file: %v", err)
	}
	if _, err := report.ReadStackUsage(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no .su files") {
		t.Errorf("a directory without .su files: %v", err)
	}
}
