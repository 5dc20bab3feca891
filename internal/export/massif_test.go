package export_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/export"
)

func writeMassif(t *testing.T, rec *recording) (path string, text string) {
	t.Helper()
	var out bytes.Buffer
	if err := export.Massif(&out, rec.proc); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "massif.out")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, out.String()
}

// TestMassifStrict checks the massif file against the rules of
// massif-visualizer's parser, stricter than ms_print's, and its numbers
// against the analysis.
func TestMassifStrict(t *testing.T) {
	rec := heapRecording(t)
	_, text := writeMassif(t, rec)
	snapshots, err := checkMassif(text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	p := rec.proc
	var peak, last *massifSnapshot
	for i := range snapshots {
		s := &snapshots[i]
		if s.tree == "peak" {
			if peak != nil {
				t.Errorf("snapshots %d and %d are both the peak", peak.n, s.n)
			}
			peak = s
		}
		if s.heap > p.Summary.PeakBytes {
			t.Errorf("snapshot %d: %d bytes, more than the peak, %d", s.n, s.heap, p.Summary.PeakBytes)
		}
		last = s
	}
	if peak == nil {
		t.Fatalf("no peak snapshot:\n%s", text)
	}
	if peak.heap != p.Summary.PeakBytes || peak.top != peak.heap {
		t.Errorf("peak snapshot: mem_heap_B=%d, tree %d; the peak is %d bytes", peak.heap, peak.top, p.Summary.PeakBytes)
	}
	if last.tree != "detailed" || last.heap != p.Summary.InUseAtExitBytes || last.top != last.heap {
		t.Errorf("last snapshot: %s, mem_heap_B=%d, tree %d; %d bytes were in use at exit", last.tree, last.heap, last.top, p.Summary.InUseAtExitBytes)
	}
	if len(snapshots) < 4 {
		t.Errorf("%d snapshots: the fixture's phases, 5 ms apart, should have some each", len(snapshots))
	}
}

// massifSnapshot is what checkMassif read of a snapshot.
type massifSnapshot struct {
	n         int
	time      float64
	heap, top uint64 // mem_heap_B, and the top node of its tree
	tree      string
}

var (
	massifHeader = []string{"desc: ", "cmd: ", "time_unit: "}
	massifFields = []string{"time", "mem_heap_B", "mem_heap_extra_B", "mem_stacks_B", "heap_tree"}
	massifNode   = regexp.MustCompile(`^( *)n(\d+): (\d+) (\S.*)$`)
)

// checkMassif reads a massif file as massif-visualizer's parser does, and
// fails where it would: a header of desc, cmd and time_unit lines; then
// snapshots, each between two exact "#-----------" lines, with one
// "key=value" line per field in massif's order; detailed trees as lines
// "nK: BYTES LABEL" indented by one space per level, with exactly the
// children their K says. No blank line anywhere; every line ends with a
// newline. It also checks what ms_print needs: no child more than its
// snapshot's total.
func checkMassif(text string) ([]massifSnapshot, error) {
	if !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("the last line has no newline")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			return nil, fmt.Errorf("line %d is blank", i+1)
		}
	}
	if len(lines) < len(massifHeader) {
		return nil, fmt.Errorf("no header")
	}
	for i, prefix := range massifHeader {
		if !strings.HasPrefix(lines[i], prefix) {
			return nil, fmt.Errorf("line %d: %q does not start with %q", i+1, lines[i], prefix)
		}
	}
	if unit := strings.TrimPrefix(lines[2], "time_unit: "); unit != "ms" && unit != "i" && unit != "B" {
		return nil, fmt.Errorf("time unit %q", unit)
	}
	var snapshots []massifSnapshot
	at := len(massifHeader)
	for at < len(lines) {
		s := massifSnapshot{n: len(snapshots)}
		if at+2+len(massifFields) >= len(lines)+1 {
			return nil, fmt.Errorf("line %d: snapshot cut short", at+1)
		}
		if lines[at] != "#-----------" || lines[at+2] != "#-----------" || lines[at+1] != fmt.Sprintf("snapshot=%d", s.n) {
			return nil, fmt.Errorf("line %d: not the header of snapshot %d: %q", at+1, s.n, lines[at:at+3])
		}
		at += 3
		values := make(map[string]string)
		for _, key := range massifFields {
			k, v, ok := strings.Cut(lines[at], "=")
			if !ok || k != key || v == "" || strings.TrimSpace(v) != v {
				return nil, fmt.Errorf("line %d: %q is not %s=VALUE", at+1, lines[at], key)
			}
			values[k] = v
			at++
		}
		var err error
		if s.time, err = strconv.ParseFloat(values["time"], 64); err != nil {
			return nil, fmt.Errorf("snapshot %d: time %q", s.n, values["time"])
		}
		if s.heap, err = strconv.ParseUint(values["mem_heap_B"], 10, 64); err != nil {
			return nil, fmt.Errorf("snapshot %d: mem_heap_B %q", s.n, values["mem_heap_B"])
		}
		for _, k := range []string{"mem_heap_extra_B", "mem_stacks_B"} {
			if _, err := strconv.ParseUint(values[k], 10, 64); err != nil {
				return nil, fmt.Errorf("snapshot %d: %s %q", s.n, k, values[k])
			}
		}
		if n := len(snapshots); n > 0 && s.time < snapshots[n-1].time {
			return nil, fmt.Errorf("snapshot %d: time %v before the previous one's, %v", s.n, s.time, snapshots[n-1].time)
		}
		s.tree = values["heap_tree"]
		switch s.tree {
		case "empty":
		case "peak", "detailed":
			if s.top, at, err = checkMassifTree(lines, at, 0, s.heap); err != nil {
				return nil, fmt.Errorf("snapshot %d: %w", s.n, err)
			}
		default:
			return nil, fmt.Errorf("snapshot %d: heap_tree=%q", s.n, s.tree)
		}
		snapshots = append(snapshots, s)
	}
	return snapshots, nil
}

// checkMassifTree checks the node at line at, and its children, at depth;
// it returns the node's bytes and the line after its subtree.
func checkMassifTree(lines []string, at, depth int, total uint64) (uint64, int, error) {
	if at >= len(lines) {
		return 0, at, fmt.Errorf("the tree is cut short")
	}
	m := massifNode.FindStringSubmatch(lines[at])
	if m == nil || len(m[1]) != depth {
		return 0, at, fmt.Errorf("line %d: %q is no tree node at depth %d", at+1, lines[at], depth)
	}
	children, _ := strconv.Atoi(m[2])
	bytes, err := strconv.ParseUint(m[3], 10, 64)
	if err != nil || bytes > total {
		return 0, at, fmt.Errorf("line %d: %s bytes, more than the snapshot's %d", at+1, m[3], total)
	}
	at++
	var sum uint64
	for range children {
		var b uint64
		if b, at, err = checkMassifTree(lines, at, depth+1, total); err != nil {
			return 0, at, err
		}
		sum += b
	}
	if sum > bytes {
		return 0, at, fmt.Errorf("the children of %q add up to %d bytes, more than it", m[4], sum)
	}
	return bytes, at, nil
}

// TestMassifPrint runs ms_print, valgrind's own reader, on the massif
// file: it must read it and show the peak and the fixture's functions.
func TestMassifPrint(t *testing.T) {
	rec := heapRecording(t)
	path, text := writeMassif(t, rec)
	msPrint, err := exec.LookPath("ms_print")
	if err != nil {
		t.Fatalf("ms_print (of valgrind) is the consumer this test checks the massif file with: %v", err)
	}
	out, err := exec.Command(msPrint, path).CombinedOutput()
	if err != nil {
		t.Fatalf("ms_print: %v\n%s\nof:\n%s", err, out, text)
	}
	printed := string(out)
	peak := commify(rec.proc.Summary.PeakBytes)
	// The peak's detailed tree begins with its total, the percentages of
	// the functions that held it under it.
	for _, want := range []string{
		"(" + peak + "B) (heap allocation functions) malloc/new/new[], --alloc-fns, etc.",
		": new_row (", ": build_table (", ": leak_some (", ": main (",
		"Detailed snapshots: [",
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("ms_print does not show %q:\n%s", want, printed)
		}
	}
	// The graph is of heap and stacks together, and its y axis is
	// labeled with their most; the stacks are the process's stack peak
	// at their most.
	var most, mostStacks uint64
	var heap uint64
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, "mem_heap_B="); ok {
			heap, _ = strconv.ParseUint(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "mem_stacks_B="); ok {
			stacks, _ := strconv.ParseUint(v, 10, 64)
			most, mostStacks = max(most, heap+stacks), max(mostStacks, stacks)
		}
	}
	if want := rec.proc.Summary.StackPeakBytes; mostStacks != want || want == 0 {
		t.Errorf("mem_stacks_B is at most %d, want the stack peak, %d", mostStacks, want)
	}
	if label := fmt.Sprintf("%.1f^", float64(most)/1024); !strings.Contains(printed, label) {
		t.Errorf("ms_print's graph does not rise to %s KiB (%q):\n%s", commify(most), label, printed)
	}
}

// commify writes n with commas between thousands, as ms_print does.
func commify(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestMassifAgainstValgrind runs the fixture under valgrind's massif,
// measuring every allocation exactly, and compares its peak with ours.
func TestMassifAgainstValgrind(t *testing.T) {
	rec := heapRecording(t)
	vg, err := exec.LookPath("valgrind")
	if err != nil {
		t.Fatalf("valgrind's massif is the oracle of this test: %v", err)
	}
	out := filepath.Join(t.TempDir(), "massif.out")
	cmd := exec.Command(vg, "--tool=massif", "--heap-admin=0", "--peak-inaccuracy=0", "--detailed-freq=1",
		"--massif-out-file="+out, rec.prog)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("valgrind: %v\n%s", err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// valgrind's own file passes the checks ours has to.
	snapshots, err := checkMassif(string(data))
	if err != nil {
		t.Fatalf("the checker rejects valgrind's own massif file: %v", err)
	}
	var theirs uint64
	for _, s := range snapshots {
		if s.tree == "peak" {
			theirs = s.heap
		}
	}
	if ours := rec.proc.Summary.PeakBytes; ours != theirs {
		t.Errorf("peak: memtrail %d bytes, massif %d", ours, theirs)
	}
}
