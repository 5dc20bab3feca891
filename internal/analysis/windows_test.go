package analysis_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace"
)

// TestWindowsJoined analyzes windows of a trace of many blocks twice: from
// the start of the trace, and put together from the stretches between
// checkpoints and the parts at the window's ends (see Windows). The models
// must say the same but for the steps of their timelines, whose totals
// must still be the window's.
func TestWindowsJoined(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.mtr")
	if err := os.WriteFile(path, writeEvents(t, soundHeap(busyHeap(30000)), 4<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	whole, err := analysis.AnalyzeTrace(path, analysis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := analysis.NewWindows(path, whole, 2000, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if w.Stretches() < 8 {
		t.Fatalf("%d stretches in 30,000 events, one every 2,000 wanted", w.Stretches())
	}
	run := whole.Processes[0].RunTime()
	joined := 0
	for _, win := range [][2]uint64{
		{0, run / 2}, {1, run - 1}, {run / 10, run * 9 / 10}, {run / 3, run / 2}, {run / 7, run * 6 / 7},
		{run / 5, run + 100}, {run / 2, run / 2}, {run * 9 / 10, run - 1},
	} {
		for _, objects := range []int{0, 3, -1} {
			opts := analysis.Options{From: win[0], To: win[1], Objects: objects, HeapMap: 64, Stacks: whole}
			want, err := analysis.AnalyzeTrace(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			got, ok, err := w.Join(opts)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				continue
			}
			joined++
			name := func() string { return "window " + fmtUint(win[0]) + " to " + fmtUint(win[1]) }
			gp, wp := got.Processes[0], want.Processes[0]
			checkTimeline(t, name(), gp)
			if gp.Timeline.Start != wp.Timeline.Start || gp.Timeline.Step != wp.Timeline.Step || len(gp.Timeline.Points) != len(wp.Timeline.Points) {
				t.Errorf("%s: timeline of %d steps of %d ns from %d, %d of %d from %d wanted", name(),
					len(gp.Timeline.Points), gp.Timeline.Step, gp.Timeline.Start, len(wp.Timeline.Points), wp.Timeline.Step, wp.Timeline.Start)
			}
			gp.Timeline = wp.Timeline
			if !analysis.SameModels(got, want) {
				t.Errorf("%s: the model put together differs from the one replayed from the start\n%s", name(), analysis.DiffModels(got, want))
			}
		}
	}
	if joined < 12 {
		t.Errorf("only %d windows were put together", joined)
	}
	// Analyze puts together what it can and replays the rest.
	for _, win := range [][2]uint64{{run / 3, run / 3}, {run / 4, run * 3 / 4}} {
		opts := analysis.Options{From: win[0], To: win[1]}
		got, err := w.Analyze(opts)
		if err != nil {
			t.Fatal(err)
		}
		opts.Stacks = whole
		want, err := analysis.AnalyzeTrace(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		got.Processes[0].Timeline = want.Processes[0].Timeline
		if !analysis.SameModels(got, want) {
			t.Errorf("Analyze of window %d to %d differs from the replay from the start", win[0], win[1])
		}
	}
}

// checkTimeline checks that the timeline of p adds up to its summary: its
// allocations and frees, its peak, and what is live at its end.
func checkTimeline(t *testing.T, name string, p *analysis.Process) {
	t.Helper()
	var allocs, frees, peak uint64
	for _, pt := range p.Timeline.Points {
		allocs += pt.Allocations
		frees += pt.Frees
		peak = max(peak, pt.PeakBytes)
	}
	s := p.Summary
	if allocs != s.Allocations || frees != s.Frees || peak != s.PeakBytes {
		t.Errorf("%s: the timeline has %d allocations, %d frees and a peak of %d bytes; the summary %d, %d and %d",
			name, allocs, frees, peak, s.Allocations, s.Frees, s.PeakBytes)
	}
	if pts := p.Timeline.Points; len(pts) > 0 && pts[len(pts)-1].EndBytes != s.InUseAtExitBytes {
		t.Errorf("%s: the timeline ends with %d bytes live, the summary with %d", name, pts[len(pts)-1].EndBytes, s.InUseAtExitBytes)
	}
}

func fmtUint(n uint64) string { return strconv.FormatUint(n, 10) }

// soundHeap drops the allocations at addresses still live from events, so
// that their trace has nothing to warn about.
func soundHeap(events []trace.Event) []trace.Event {
	live := make(map[uint64]bool)
	var kept []trace.Event
	for _, e := range events {
		switch e.Kind {
		case trace.KindAlloc:
			if live[e.Addr] {
				continue
			}
			live[e.Addr] = true
		case trace.KindFree:
			delete(live, e.Addr)
		case trace.KindRealloc:
			if e.Addr != e.OldAddr && live[e.Addr] {
				continue
			}
			delete(live, e.OldAddr)
			live[e.Addr] = true
		}
		kept = append(kept, e)
	}
	return kept
}
