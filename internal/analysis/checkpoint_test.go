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
	// The latest checkpoint before the window (how late that is depends
	// on how many events a block holds).
	var cp *analysis.Checkpoint
	for i := len(fileCps) - 1; i >= len(fileCps)/2 && cp == nil; i-- {
		if fileCps[i].Fits(opts) {
			cp = fileCps[i]
		}
	}
	if cp == nil {
		t.Fatal("no checkpoint of the second half of the run fits its last tenth")
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

// TestCheckpointsThinned checks that checkpoints over the bound on the
// memory they hold stay spread over the whole trace: every other one
// goes, rather than the latest ones never being made.
func TestCheckpointsThinned(t *testing.T) {
	data := writeEvents(t, busyHeap(20000), 4<<10)
	checkpoints := func(maxBytes uint64) []*analysis.Checkpoint {
		r, err := trace.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		cps, err := analysis.Checkpoints(r, 1000, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		return cps
	}
	all := checkpoints(1 << 40)
	bound := analysis.HeldBytes(all) / 3
	few := checkpoints(bound)
	if len(all) < 10 || len(few) < 2 || len(few) >= len(all)/2 {
		t.Fatalf("%d checkpoints unbounded, %d within %d bytes; want at least 10, and from 2 to half as many", len(all), len(few), bound)
	}
	if held := analysis.HeldBytes(few); held > bound {
		t.Errorf("the checkpoints hold %d bytes, over the bound of %d", held, bound)
	}
	made := map[int64]bool{}
	for _, cp := range all {
		made[cp.Position().Offset] = true
	}
	for _, cp := range few {
		if !made[cp.Position().Offset] {
			t.Errorf("checkpoint at %d is not one of those made unbounded", cp.Position().Offset)
		}
	}
	if last, end := few[len(few)-1].Position().Offset, all[len(all)-1].Position().Offset; last < end*2/3 {
		t.Errorf("the last checkpoint within the bound is at %d, the last unbounded at %d: not spread over the trace", last, end)
	}

	// The heap grows: within what the middle checkpoint holds alone, the
	// later ones do not fit, and the earlier ones stay.
	bound = analysis.HeldBytes(all[len(all)/2 : len(all)/2+1])
	early := checkpoints(bound)
	if len(early) == 0 || analysis.HeldBytes(early) > bound {
		t.Fatalf("%d checkpoints within %d bytes, holding %d; want some, within the bound", len(early), bound, analysis.HeldBytes(early))
	}
	if last := early[len(early)-1].Position().Offset; last > all[len(all)/2].Position().Offset {
		t.Errorf("a checkpoint at %d, after the middle one at %d, fits within what the middle one holds alone", last, all[len(all)/2].Position().Offset)
	}
}
