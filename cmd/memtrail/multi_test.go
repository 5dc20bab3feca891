package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/web"
)

// recordMulti records testdata/multi.c run with args and returns the trace.
func recordMulti(t *testing.T, args ...string) string {
	t.Helper()
	return recordMultiWith(t, nil, args...)
}

// recordMultiWith records testdata/multi.c run with args, with the
// options of memtrail run runOpts, and returns the trace.
func recordMultiWith(t *testing.T, runOpts []string, args ...string) string {
	t.Helper()
	prog := fixture.Build(t, filepath.Join("testdata", "multi.c"))
	trace := filepath.Join(t.TempDir(), "multi.mtr")
	var stdout, stderr bytes.Buffer
	cmdline := append(append(append([]string{"run", "-q", "-o", trace}, runOpts...), "--", prog), args...)
	if code, err := run(cmdline, &stdout, &stderr); code != 0 || err != nil {
		t.Fatalf("run multi %s: status %d (%v)\n%s", strings.Join(args, " "), code, err, stderr.String())
	}
	return trace
}

// runOK runs memtrail with args, which must succeed, and returns its
// stdout and stderr.
func runOK(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code, err := run(args, &stdout, &stderr); code != 0 || err != nil {
		t.Fatalf("memtrail %s: status %d (%v)\n%s%s", strings.Join(args, " "), code, err, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

// listedProcess is a process of report -processes -json.
type listedProcess struct {
	ID     string   `json:"id"`
	PID    uint64   `json:"pid"`
	PPID   uint64   `json:"ppid"`
	Args   []string `json:"args"`
	Peak   uint64   `json:"peak_bytes"`
	Allocs uint64   `json:"allocations"`
}

// processesOf returns the list of processes of report -processes -json.
func processesOf(t *testing.T, trace string) []listedProcess {
	t.Helper()
	out, _ := runOK(t, "report", "-processes", "-json", trace)
	var list struct {
		Processes []listedProcess `json:"processes"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("report -processes -json: %v\n%s", err, out)
	}
	return list.Processes
}

// TestReportManyProcesses records the field's case, a program of 163
// processes (130 fork children, 32 of which exec another image): the
// summary lists 10 of the other processes, those of the highest peaks, and
// says where the rest are; report -processes and the JSON list them all.
func TestReportManyProcesses(t *testing.T) {
	trace := recordMulti(t, "fork", "130")
	out, _ := runOK(t, "report", trace)
	head := "Other processes in this trace: the 10 of 162 with the highest peaks (memtrail report -processes lists them all)"
	i := strings.Index(out, head)
	if i < 0 {
		t.Fatalf("report: no %q in\n%s", head, out)
	}
	// The section's title, the table's head and 10 rows.
	if rows := strings.Split(strings.TrimSpace(out[i:]), "\n"); len(rows) != 12 {
		t.Errorf("report: the list of other processes has %d lines, want 12:\n%s", len(rows), out[i:])
	}
	if lines := strings.Count(out, "\n"); lines > 120 {
		t.Errorf("report of 163 processes: %d lines", lines)
	}

	list, _ := runOK(t, "report", "-processes", trace)
	if rows := strings.Count(list, "\n"); rows != 2+163 {
		t.Errorf("report -processes: %d lines, want a title, a head and 163 processes:\n%s", rows, list)
	}
	if procs := processesOf(t, trace); len(procs) != 163 {
		t.Errorf("report -processes -json: %d processes, want 163", len(procs))
	}
	var js struct {
		Processes []json.RawMessage `json:"processes"`
	}
	summary, _ := runOK(t, "report", "-json", trace)
	if err := json.Unmarshal([]byte(summary), &js); err != nil || len(js.Processes) != 163 {
		t.Errorf("report -json: %d processes (%v), want 163", len(js.Processes), err)
	}

	// check: the parent's budget broke, and the other 162 held theirs.
	for _, asJSON := range []bool{false, true} {
		args := []string{"check", "-max-peak", "100KiB", trace}
		if asJSON {
			args = slices.Insert(args, 1, "-json")
		}
		var stdout, stderr bytes.Buffer
		if code, err := run(args, &stdout, &stderr); code != budgetBroken || err != nil {
			t.Fatalf("check: status %d (%v), want %d", code, err, budgetBroken)
		}
		out := stdout.String()
		if asJSON {
			if err := json.Unmarshal(stdout.Bytes(), &js); err != nil || len(js.Processes) != 163 {
				t.Errorf("check -json: %d verdicts (%v), want 163", len(js.Processes), err)
			}
			continue
		}
		if strings.Count(out, "FAIL") != 1 || strings.Count(out, "ok   peak heap") != 10 ||
			!strings.HasSuffix(out, "\n... and 152 more processes that held every budget (memtrail check -json lists every verdict)\n") {
			t.Errorf("check of 163 processes, of which one broke its budget:\n%s", out)
		}
	}
}

// TestPIDImages records a pid that had three images (multi exec2 execs
// exec1, which execs image): -pid PID is the last, PID.1 to PID.3 each
// of them, in report, check, diff, export and the web UI's API, PID.4 an
// error that lists them; report -processes names them so, and says to
// use its first column as -pid, and the report of each image names the
// -pid of each.
func TestPIDImages(t *testing.T) {
	trace := recordMulti(t, "exec2")
	procs := processesOf(t, trace)
	if len(procs) != 3 {
		t.Fatalf("report -processes: %d processes, want 3: %+v", len(procs), procs)
	}
	pid := procs[0].PID
	for i, p := range procs {
		if want := fmt.Sprintf("%d.%d", pid, i+1); p.ID != want {
			t.Errorf("process %d is named %q, want %q", i, p.ID, want)
		}
	}
	table, _ := runOK(t, "report", "-processes", trace)
	for _, want := range []string{fmt.Sprintf("see one with memtrail report and the -pid of its first column (e.g. -pid %d.1)\n", pid),
		"-pid  program", fmt.Sprintf("\n  %d.1  ", pid)} {
		if !strings.Contains(table, want) {
			t.Errorf("report -processes: no %q in\n%s", want, table)
		}
	}
	ids := func(images ...int) string {
		var list []string
		for _, k := range images {
			list = append(list, fmt.Sprintf("-pid %d.%d", pid, k))
		}
		return strings.Join(list, ", ")
	}
	for _, c := range []struct{ pid, program, image string }{
		{fmt.Sprint(pid), "exec2 image", "(image 3 of 3, " + ids(3) + "; the others: " + ids(1, 2) + ")"},
		{fmt.Sprintf("%d.1", pid), "exec2 exec2", "(image 1 of 3, " + ids(1) + "; the others: " + ids(2, 3) + ")"},
		{fmt.Sprintf("%d.2", pid), "exec2 exec1", "(image 2 of 3, " + ids(2) + "; the others: " + ids(1, 3) + ")"},
		{fmt.Sprintf("%d.3", pid), "exec2 image", "(image 3 of 3, " + ids(3) + "; the others: " + ids(1, 2) + ")"},
	} {
		out, _ := runOK(t, "report", "-pid", c.pid, trace)
		// The command line is the program's path, then its mode.
		lines := strings.SplitN(out, "\n", 3)
		mode := c.program[strings.Index(c.program, " ")+1:]
		if !strings.Contains(lines[0], " "+mode) || !strings.Contains(lines[1], c.image) {
			t.Errorf("report -pid %s: %q, want the program in mode %s, %s", c.pid, lines[:2], mode, c.image)
		}
	}
	// Each image's own numbers: exec2 keeps 1 KiB, exec1 2 KiB, image 20,
	// and so does its export, by the command and by the web UI.
	srv, err := web.New(trace)
	if err != nil {
		t.Fatal(err)
	}
	handler := srv.Handler()
	for i, kib := range []uint64{1, 2, 20} {
		if procs[i].Peak != kib<<10 {
			t.Errorf("image %d: peak %d bytes, want %d KiB", i+1, procs[i].Peak, kib)
		}
		id := fmt.Sprintf("%d.%d", pid, i+1)
		collapsed, _ := runOK(t, "export", "-format", "collapsed", "-o", "-", "-pid", id, trace)
		if peak := collapsedTotal(t, collapsed); peak != kib<<10 {
			t.Errorf("export -format collapsed -pid %s: peak %d bytes, want %d KiB", id, peak, kib)
		}
		if peak := collapsedTotal(t, webGet(t, handler, srv.Token(), "/api/export?format=collapsed&pid="+id)); peak != kib<<10 {
			t.Errorf("/api/export?format=collapsed&pid=%s: peak %d bytes, want %d KiB", id, peak, kib)
		}
		var view struct {
			Args    []string
			Summary struct {
				Peak uint64 `json:"peak_bytes"`
			}
		}
		if err := json.Unmarshal([]byte(webGet(t, handler, srv.Token(), "/api/view?view=summary&pid="+id)), &view); err != nil {
			t.Fatalf("/api/view?view=summary&pid=%s: %v", id, err)
		}
		if view.Summary.Peak != kib<<10 {
			t.Errorf("/api/view?view=summary&pid=%s: %q, peak %d bytes, want %d KiB", id, view.Args, view.Summary.Peak, kib)
		}
	}
	out, _ := runOK(t, "check", "-max-peak", "1KiB", "-pid", fmt.Sprintf("%d.1", pid), trace)
	if !strings.Contains(out, fmt.Sprintf("(pid %d.1, replaced by exec)", pid)) || strings.Count(out, "peak heap") != 1 {
		t.Errorf("check -pid %d.1: not image 1 alone:\n%s", pid, out)
	}
	out, _ = runOK(t, "diff", "-old-pid", fmt.Sprintf("%d.1", pid), "-new-pid", fmt.Sprintf("%d.2", pid), trace, trace)
	if !strings.Contains(out, fmt.Sprintf(" exec2  (pid %d.1)", pid)) || !strings.Contains(out, fmt.Sprintf(" exec1  (pid %d.2)", pid)) {
		t.Errorf("diff -old-pid %d.1 -new-pid %d.2: not images 1 and 2:\n%s", pid, pid, out)
	}
	checkBadInput(t, []string{"report", "-pid", fmt.Sprintf("%d.4", pid), trace}, 1,
		fmt.Sprintf("process %d had 3 images, so there is no %d.4: %d.1 (", pid, pid, pid))
	checkBadInput(t, []string{"report", "-pid", fmt.Sprintf("%d.0", pid), trace}, 2, "the image after the pid counts from 1")
	checkBadInput(t, []string{"report", "-pid", "12x", trace}, 2, `"12x" is not a pid`)
	checkBadInput(t, []string{"report", "-processes", "-pid", "1", trace}, 2, "-processes goes with -json only, not with -pid")
	checkHTMLImage(t, trace, fmt.Sprintf("%d.2", pid), "exec1")
	checkBadInput(t, []string{"export", "-format", "parquet", "-o", t.TempDir(), "-pid", fmt.Sprintf("%d.2", pid), trace}, 2,
		"-format parquet writes every image of a pid: -pid takes a pid alone")
}

// webGet returns the answer of the web UI's handler to path (with a query)
// and its token, which must be 200 OK.
func webGet(t *testing.T, handler http.Handler, token, path string) string {
	t.Helper()
	w := httptest.NewRecorder()
	handler.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1"+path+"&token="+token, nil))
	if w.Code != http.StatusOK {
		t.Fatalf("%s: status %d\n%s", path, w.Code, w.Body.String())
	}
	return w.Body.String()
}

// collapsedTotal returns the sum of the weights of collapsed stacks.
func collapsedTotal(t *testing.T, collapsed string) uint64 {
	t.Helper()
	var total uint64
	for _, line := range strings.Split(strings.TrimSpace(collapsed), "\n") {
		i := strings.LastIndexByte(line, ' ')
		n, err := strconv.ParseUint(line[i+1:], 10, 64)
		if err != nil {
			t.Fatalf("collapsed line %q: %v", line, err)
		}
		total += n
	}
	return total
}

// checkHTMLImage writes report -html -pid id of trace and checks that the
// page holds the summary of that image, whose mode is mode.
func checkHTMLImage(t *testing.T, trace, id, mode string) {
	t.Helper()
	page := filepath.Join(t.TempDir(), "page.html")
	runOK(t, "report", "-html", page, "-pid", id, trace)
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	const open = `<script id="memtrail-data" type="application/json">`
	_, blob, _ := strings.Cut(string(b), open)
	blob, _, _ = strings.Cut(blob, "</script>")
	var data map[string]struct {
		Args []string `json:"args"`
	}
	if err := json.Unmarshal([]byte(blob), &data); err != nil {
		t.Fatalf("report -html -pid %s: the page's data: %v", id, err)
	}
	summary, ok := data["/api/view?view=summary&pid="+id+"&top=50"]
	if !ok || !slices.Contains(summary.Args, mode) {
		t.Errorf("report -html -pid %s: the page holds no summary of image %s in mode %s: %v", id, id, mode, summary.Args)
	}
}

// TestCheckForkChildrenOwnHeap records a parent that keeps 1 MiB live,
// loses 300 bytes and forks 3 children that keep 10 KiB each: check
// -max-peak 100KiB names the parent alone, for the children's own heap is
// 10 KiB, and so does -max-definitely-lost 0, for the lost block is the
// parent's; with -include-inherited the children break -max-peak with the
// 1 MiB they inherited.
func TestCheckForkChildrenOwnHeap(t *testing.T) {
	trace := recordMulti(t, "fork", "3")
	var stdout, stderr bytes.Buffer
	code, err := run([]string{"check", "-max-peak", "100KiB", "-max-in-use-at-exit", "10KiB", "-max-allocations", "1",
		"-max-definitely-lost", "0", "-json", trace}, &stdout, &stderr)
	if code != budgetBroken || err != nil {
		t.Fatalf("check: status %d (%v), want %d\n%s", code, err, budgetBroken, stdout.String())
	}
	var verdict struct {
		Processes []struct {
			PID              uint64 `json:"pid"`
			InheritedLeftOut bool   `json:"inherited_left_out"`
			Budgets          []struct {
				Budget string `json:"budget"`
				Actual uint64 `json:"actual"`
				Broken bool   `json:"broken"`
			} `json:"budgets"`
		} `json:"processes"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &verdict); err != nil || len(verdict.Processes) != 4 {
		t.Fatalf("check -json: %v, %d processes, want 4\n%s", err, len(verdict.Processes), stdout.String())
	}
	for i, p := range verdict.Processes {
		// The parent: 1 MiB, 100 and 300 bytes, all live at exit, the
		// 300 lost. A child: its 10 KiB; the 100 bytes it inherited and
		// freed are not its, nor are the 300 lost bytes it inherited.
		want := []uint64{10 << 10, 10 << 10, 1, 0}
		if i == 0 {
			want = []uint64{1<<20 + 400, 1<<20 + 400, 3, 300}
		}
		if p.InheritedLeftOut != (i > 0) {
			t.Errorf("process %d: inherited_left_out %v", p.PID, p.InheritedLeftOut)
		}
		for j, b := range p.Budgets {
			if b.Actual != want[j] || b.Broken != (i == 0) {
				t.Errorf("process %d (%d of 4): %s %d, broken %v; want %d, broken %v", p.PID, i+1, b.Budget, b.Actual, b.Broken, want[j], i == 0)
			}
		}
	}

	stdout.Reset()
	code, err = run([]string{"check", "-max-peak", "100KiB", trace}, &stdout, &stderr)
	if code != budgetBroken || err != nil || strings.Count(stdout.String(), "FAIL") != 1 ||
		strings.Count(stdout.String(), "forked: its own allocations only") != 3 {
		t.Errorf("check -max-peak 100KiB: status %d (%v), want the parent alone broken:\n%s", code, err, stdout.String())
	}
	stdout.Reset()
	code, err = run([]string{"check", "-include-inherited", "-max-peak", "100KiB", trace}, &stdout, &stderr)
	if code != budgetBroken || err != nil || strings.Count(stdout.String(), "FAIL") != 4 {
		t.Errorf("check -include-inherited -max-peak 100KiB: status %d (%v), want all 4 broken:\n%s", code, err, stdout.String())
	}
}

// TestExportSaysWhichProcess exports a trace of three images of one pid:
// export says on stderr which it exports, and the profile is of that one.
func TestExportSaysWhichProcess(t *testing.T) {
	trace := recordMulti(t, "exec2")
	procs := processesOf(t, trace)
	if len(procs) != 3 {
		t.Fatalf("report -processes: %d processes, want 3", len(procs))
	}
	pid := procs[0].PID
	out := filepath.Join(t.TempDir(), "heap.pb.gz")
	for _, c := range []struct {
		args  []string
		image int
	}{{nil, 3}, {[]string{"-pid", fmt.Sprintf("%d.1", pid)}, 1}, {[]string{"-pid", fmt.Sprintf("%d.2", pid)}, 2}} {
		args := append(append([]string{"export", "-format", "pprof", "-o", out}, c.args...), trace)
		_, stderr := runOK(t, args...)
		p := procs[c.image-1]
		start := fmt.Sprintf("memtrail: exporting process %s (", p.ID)
		end := fmt.Sprintf(" %s, image %d of 3) of the 3 in the trace; choose another with -pid", p.Args[1], c.image)
		if !strings.HasPrefix(stderr, start) || !strings.Contains(stderr, end) {
			t.Errorf("export %s: stderr %q, want %q...%q", strings.Join(c.args, " "), stderr, start, end)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		prof, err := profile.Parse(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		sums := make([]uint64, len(prof.SampleType))
		for _, s := range prof.Sample {
			for i, v := range s.Value {
				sums[i] += uint64(v)
			}
		}
		// Each image keeps its one block to the end: allocated and in
		// use at exit are the same.
		if want := []uint64{p.Allocs, p.Peak, 1, p.Peak}; fmt.Sprint(sums) != fmt.Sprint(want) {
			t.Errorf("export %s: the profile adds up to %v, image %d's analysis to %v", strings.Join(c.args, " "), sums, c.image, want)
		}
	}
}
