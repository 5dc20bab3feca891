package export_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/export"
	"github.com/memtrail/memtrail/internal/trace"
)

// TestPProfTotals checks that the values of the profile add up to the
// totals of the analysis, for each moment its inuse samples may count.
func TestPProfTotals(t *testing.T) {
	rec := heapRecording(t)
	p := rec.proc
	s := p.Summary
	at, moment := timeBeforeTable(t, rec)
	for _, tc := range []struct {
		name                string
		inUse               export.InUse
		inUseBlocks, inUseB uint64
	}{
		{"exit", export.InUseAtExit(), s.InUseAtExitBlocks, s.InUseAtExitBytes},
		{"peak", export.InUseAtPeak(), peakBlocks(p), s.PeakBytes},
		{"time", export.InUseAt(at, moment), moment.Summary.InUseAtExitBlocks, moment.Summary.InUseAtExitBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prof := writeProfile(t, rec, tc.inUse)
			sums := make([]uint64, len(prof.SampleType))
			for _, smp := range prof.Sample {
				for i, v := range smp.Value {
					sums[i] += uint64(v)
				}
			}
			want := []uint64{s.Allocations, s.BytesAllocated, tc.inUseBlocks, tc.inUseB}
			for i, st := range prof.SampleType {
				if sums[i] != want[i] {
					t.Errorf("%s: the samples add up to %d, the analysis says %d", st.Type, sums[i], want[i])
				}
			}
		})
	}
	// The fixture's own numbers, as its source says.
	if s.PeakBytes < 200*4096+10*1000 {
		t.Errorf("peak %d bytes: heap.c has 200 rows of 4096 bytes and 10 blocks of 1000 bytes live at once", s.PeakBytes)
	}
	if moment.Summary.InUseAtExitBytes != 10*1000 || moment.Summary.InUseAtExitBlocks != 10 {
		t.Errorf("at %v, before build_table: %d bytes in %d blocks live; heap.c keeps 10 blocks of 1000 bytes",
			at, moment.Summary.InUseAtExitBytes, moment.Summary.InUseAtExitBlocks)
	}
}

// peakBlocks returns the blocks live at the peak of p, which the summary
// does not keep: the sites do.
func peakBlocks(p *analysis.Process) uint64 {
	var n uint64
	for _, s := range p.SiteList() {
		n += s.PeakBlocks
	}
	return n
}

// timeBeforeTable returns a moment in the pause of heap.c between
// leak_some and build_table, and the process analyzed at that moment.
func timeBeforeTable(t *testing.T, rec *recording) (time.Duration, *analysis.Process) {
	t.Helper()
	r := openTrace(t, rec.path)
	var firstRow uint64
	for firstRow == 0 {
		rec, err := r.Next()
		if err != nil {
			t.Fatalf("no allocation of 4096 bytes in the trace: %v", err)
		}
		if rec.Kind == trace.KindAlloc && rec.Event.Size == 4096 {
			firstRow = rec.Event.Time
		}
	}
	at := time.Duration(firstRow-rec.proc.Start) - 2*time.Millisecond
	m, err := analysis.AnalyzeTrace(rec.path, analysis.Options{From: uint64(at), To: uint64(at)})
	if err != nil {
		t.Fatal(err)
	}
	return at, m.Processes[0]
}

// writeProfile exports the recording's process as a pprof profile into a
// file of the test, and reads it back with pprof's own parser.
func writeProfile(t *testing.T, rec *recording, inUse export.InUse) *profile.Profile {
	t.Helper()
	var out bytes.Buffer
	if err := export.PProf(&out, rec.model.Info, rec.proc, inUse); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "heap.pb.gz")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	prof, err := profile.Parse(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatalf("pprof cannot parse the profile: %v", err)
	}
	if err := prof.CheckValid(); err != nil {
		t.Fatalf("the profile is not valid: %v", err)
	}
	return prof
}

// TestPProfTool runs go tool pprof on the profile, as its users would,
// and checks that it shows the fixture's functions and their lines
// without the fixture's binary at hand.
func TestPProfTool(t *testing.T) {
	rec := heapRecording(t)
	var out bytes.Buffer
	if err := export.PProf(&out, rec.model.Info, rec.proc, export.InUseAtExit()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "heap.pb.gz")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// The binary is out of pprof's reach: whatever it shows comes from
	// the profile.
	top := goToolPProf(t, dir, "-top", "-sample_index=alloc_space", path)
	for _, fn := range []string{"build_table", "grow", "churn", "leak_some", "main"} {
		if !strings.Contains(top, " "+fn+"\n") {
			t.Errorf("go tool pprof -top does not show %s:\n%s", fn, top)
		}
	}
	lines := goToolPProf(t, dir, "-top", "-lines", "-sample_index=alloc_space", path)
	for _, want := range []string{`leak_some \S*heap\.c:\d+\n`, `new_row \S*heap\.c:\d+ \(inline\)\n`, `build_table \S*heap\.c:\d+\n`} {
		if !regexp.MustCompile(want).MatchString(lines) {
			t.Errorf("go tool pprof -top -lines shows no line matching %q:\n%s", want, lines)
		}
	}
	if !strings.Contains(top, "Type: alloc_space") {
		t.Errorf("go tool pprof -top does not say it shows alloc_space:\n%s", top)
	}
}

// goToolPProf runs go tool pprof with args in dir, where it looks for
// binaries and finds none. (The first run builds pprof into the Go cache.)
func goToolPProf(t *testing.T, dir string, args ...string) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go tool pprof is the consumer this test checks the profile with: %v", err)
	}
	cmd := exec.Command(goCmd, append([]string{"tool", "pprof"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PPROF_BINARY_PATH="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
