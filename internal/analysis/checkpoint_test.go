package analysis_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace"
)

// TestCheckpoints analyzes windows of a trace of many blocks twice: from
// its start, and going on from each checkpoint the window begins after.
// The models must be the same, stopping at the window's end or not.
func TestCheckpoints(t *testing.T) {
	data := writeEvents(t, busyHeap(20000), 4<<10)
	reader := func() *trace.Reader {
		r, err := trace.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	cps, err := analysis.Checkpoints(reader(), 2000, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) < 5 {
		t.Fatalf("%d checkpoints in 20,000 events, one every 2,000 wanted", len(cps))
	}
	whole, err := analysis.Analyze(reader(), analysis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := whole.Processes[0].RunTime()
	resumed := 0
	for _, w := range [][2]uint64{{run / 3, run / 2}, {run / 2, run / 2}, {run * 9 / 10, run - 1}, {run / 2, 0}, {run / 4, run + 100}} {
		for _, stacks := range []*analysis.Model{nil, whole} {
			opts := analysis.Options{From: w[0], To: w[1], Stacks: stacks}
			want, err := analysis.Analyze(reader(), opts)
			if err != nil {
				t.Fatal(err)
			}
			for i, cp := range cps {
				if !cp.Fits(opts) {
					continue
				}
				at := cp.Position()
				r := trace.NewReaderAt(bytes.NewReader(data[at.Offset:]), at)
				got, err := analysis.AnalyzeFrom(cp, r, opts)
				if err != nil {
					t.Fatal(err)
				}
				resumed++
				if !analysis.SameModels(got, want) {
					t.Errorf("window %d to %d (stacks %v), from checkpoint %d: the model differs from the one from the start",
						w[0], w[1], stacks != nil, i)
				}
			}
		}
	}
	if resumed < 10 {
		t.Errorf("only %d analyses went on from a checkpoint", resumed)
	}

	// The same from a trace file, as the web UI does.
	path := filepath.Join(t.TempDir(), "busy.mtr")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	fileCps, err := analysis.CheckpointsOfFile(path, 2000, 1<<30)
	if err != nil || len(fileCps) != len(cps) {
		t.Fatalf("%d checkpoints of the file (%v), %d of the bytes", len(fileCps), err, len(cps))
	}
	opts := analysis.Options{From: run * 9 / 10, To: run - 1, Stacks: whole}
	cp := fileCps[len(fileCps)-1]
	if !cp.Fits(opts) {
		t.Fatal("the last checkpoint does not fit the last tenth of the run")
	}
	got, err := analysis.AnalyzeFileFrom(path, cp, opts)
	if err != nil {
		t.Fatal(err)
	}
	want, err := analysis.Analyze(reader(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !analysis.SameModels(got, want) {
		t.Error("the window of the file, from its last checkpoint, differs from the one from the start")
	}
}
