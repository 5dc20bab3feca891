package record_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/record"
	"github.com/memtrail/memtrail/internal/trace"
)

// Depths of testdata/stackuse.c phases.
const (
	callsShallow = 20
	callsDeep    = 60
	callsThread  = 30
)

// recordCalls records prog phases, with or without -stack-calls, in time
// units of 100 us, whose times the agent reads from the CPU's counter at
// each event: the phases are 20 ms apart, and at the default unit the
// recorder's clock can lag by that much on a loaded machine, which put
// two phases in one unit.
func recordCalls(t *testing.T, prog string, stackCalls bool) *record.Result {
	t.Helper()
	dir := t.TempDir()
	var log strings.Builder
	res, err := record.Run(record.Options{Args: []string{prog, "phases"}, Output: filepath.Join(dir, "trace.mtr"),
		AgentPath: fixture.Agent(t), Stdout: os.Stdout, Stderr: os.Stderr, Log: &log, Version: "test", StackCalls: stackCalls, TimeUnit: 100 * time.Microsecond})
	if err != nil {
		t.Fatalf("recording %s: %v", prog, err)
	}
	if res.WriteErr != nil {
		t.Fatalf("recording %s: %v", prog, res.WriteErr)
	}
	return res
}

// TestStackCalls records testdata/stackuse.c phases, built with
// -finstrument-functions and -fstack-usage, with -stack-calls, and checks
// what the agent measured at the function entries and returns against
// the frame sizes the compiler reports:
//
//   - each thread's deepest entry is its base (the stack in use at its
//     first allocation, main's or worker's frame included) plus the
//     frames of the recursion, within the ABI's 16-byte alignment;
//   - the stack in use per time unit rises and falls with the phases of
//     main's recursion: shallow, deep, shallow;
//   - the call stack of the deepest entry names recurse, callsDeep+1
//     times, and main, and its frames' sizes are recurse's and main's.
func TestStackCalls(t *testing.T) {
	prog, frames := buildWithStackUsage(t, src("stackuse.c"), "-finstrument-functions")
	res := recordCalls(t, prog, true)
	recs := readTrace(t, res.Path)
	events, _ := stackOfTrace(t, res.Path)
	if len(events[1]) < 2 || len(events[2]) < 2 {
		t.Fatalf("events by thread: %v, want the main thread's and the other's malloc and free", events)
	}
	mainBase, threadBase := events[1][0], events[2][0]
	want := func(base, depth uint64) uint64 { return base + (depth+1)*frames["recurse"] }
	near := func(got, want uint64) bool { return got+stackSlack >= want && got <= want+stackSlack }

	var calls []trace.StackCalls
	deepest := map[uint64]trace.DeepestStack{}
	nodes := map[uint64]trace.StackNode{}
	names := map[uint64]string{} // symbol offset → function
	strs := map[uint64]string{}
	for _, rec := range recs {
		switch rec.Kind {
		case trace.KindStackCalls:
			calls = append(calls, *rec.StackCalls)
		case trace.KindDeepestStack:
			if d := rec.DeepestStack; d.Bytes > deepest[d.Thread].Bytes {
				deepest[d.Thread] = *d
			}
		case trace.KindStackNode:
			nodes[rec.StackNode.ID] = *rec.StackNode
		case trace.KindString:
			strs[rec.String.ID] = rec.String.Value
		case trace.KindSymbol:
			if fs := rec.Symbol.Frames; len(fs) > 0 && rec.Symbol.Object == 1 {
				names[rec.Symbol.Offset] = strs[fs[len(fs)-1].Function]
			}
		}
	}
	if res.Calls == 0 || len(calls) == 0 {
		t.Fatalf("no calls measured (%d), %d stack-calls records", res.Calls, len(calls))
	}

	// Each thread's deepest entry.
	peak := map[uint64]uint64{}
	for _, c := range calls {
		peak[c.Thread] = max(peak[c.Thread], c.Max)
	}
	for _, c := range []struct {
		what        string
		thread      uint64
		base, depth uint64
	}{{"main thread", 1, mainBase, callsDeep}, {"other thread", 2, threadBase, callsThread}} {
		w := want(c.base, c.depth)
		if got := peak[c.thread]; !near(got, w) {
			t.Errorf("%s: deepest entry %d bytes, want %d ± %d (base %d + %d frames of %d)", c.what, got, w, stackSlack, c.base, c.depth+1, frames["recurse"])
		} else {
			t.Logf("%s: deepest entry %d bytes, frames say %d (base %d + %d × %d)", c.what, got, w, c.base, c.depth+1, frames["recurse"])
		}
		if d := deepest[c.thread]; d.Bytes != peak[c.thread] {
			t.Errorf("%s: deepest stack of %d bytes, want the deepest entry's %d", c.what, d.Bytes, peak[c.thread])
		}
	}

	// The phases of main: the maxima of its records, in order, with
	// runs of equal values made one, go up to the shallow depth, down,
	// up to the deep one, down, and up to the shallow one again.
	shallow, deep := want(mainBase, callsShallow), want(mainBase, callsDeep)
	var phases []string
	for _, c := range calls {
		if c.Thread != 1 {
			continue
		}
		p := "low"
		switch {
		case near(c.Max, deep):
			p = "deep"
		case near(c.Max, shallow):
			p = "shallow"
		}
		if len(phases) == 0 || phases[len(phases)-1] != p {
			phases = append(phases, p)
		}
	}
	phases = slices.DeleteFunc(phases, func(p string) bool { return p == "low" })
	if !slices.Equal(phases, []string{"shallow", "deep", "shallow"}) {
		t.Errorf("main's phases %v, want shallow, deep, shallow: %+v", phases, calls)
	}

	// The deepest stack of main: recurse callsDeep+1 times, then main,
	// each frame the size -fstack-usage gives it.
	d := deepest[1]
	var funcs []string
	for id := d.Stack; id != 0; id = nodes[id].Parent {
		funcs = append(funcs, names[nodes[id].Offset])
	}
	if len(funcs) < callsDeep+2 || funcs[callsDeep] != "recurse" || funcs[callsDeep+1] != "main" || funcs[0] != "recurse" {
		t.Fatalf("deepest stack of main: %v, want recurse %d times, then main", funcs, callsDeep+1)
	}
	if len(d.FrameSizes) < callsDeep+2 {
		t.Fatalf("deepest stack of main: %d frame sizes for %d frames", len(d.FrameSizes), len(funcs))
	}
	for i, size := range d.FrameSizes[:callsDeep+2] {
		if w := frames[funcs[i]]; size != w {
			t.Errorf("frame %d (%s) takes %d bytes, -fstack-usage says %d", i, funcs[i], size, w)
		}
	}

	// The analysis: each thread's peak is its deepest entry, exact, and
	// the timeline's stack goes up and down with main's phases.
	m := analyze(t, res.Path)
	p := m.Processes[0]
	for _, th := range p.Threads {
		if th.StackPeakBytes != peak[th.Index] || th.StackSampledOnly || th.StackCalls == 0 {
			t.Errorf("thread %d: stack peak %d (sampled only %v, %d calls), want its deepest entry's %d",
				th.Index, th.StackPeakBytes, th.StackSampledOnly, th.StackCalls, peak[th.Index])
		}
	}
	if d := p.Summary.DeepestStack; !d.FunctionEntry || d.Thread != 1 || d.Bytes != peak[1] || d.Stack == 0 {
		t.Errorf("deepest stack %+v, want main's deepest entry, %d bytes", d, peak[1])
	}
	var steps []string
	for _, pt := range p.Timeline.Points {
		s := "low"
		switch {
		case near(pt.StackBytes, deep):
			s = "deep"
		case near(pt.StackBytes, shallow):
			s = "shallow"
		case pt.StackBytes > shallow+stackSlack:
			s = "other"
		}
		if len(steps) == 0 || steps[len(steps)-1] != s {
			steps = append(steps, s)
		}
	}
	if !slices.Equal(steps[:min(len(steps), 6)], []string{"low", "shallow", "low", "deep", "low", "shallow"}) {
		t.Errorf("the timeline's stack goes %v, want low, shallow, low, deep, low, shallow", steps)
	}

	// The sizes add up to the stack in use, but for a stack cut short
	// by the depth limit (64 frames), whose outermost frame has none.
	for thread, d := range deepest {
		var sum uint64
		for _, size := range d.FrameSizes {
			sum += size
		}
		n := 0
		for id := d.Stack; id != 0; id = nodes[id].Parent {
			n++
		}
		switch {
		case n < 64 && (len(d.FrameSizes) != n || sum != d.Bytes):
			t.Errorf("thread %d: %d frame sizes for %d frames add up to %d, the deepest entry was %d bytes deep", thread, len(d.FrameSizes), n, sum, d.Bytes)
		case n == 64 && (len(d.FrameSizes) != n-1 || sum >= d.Bytes):
			t.Errorf("thread %d: a stack cut short: %d frame sizes for %d frames add up to %d of %d bytes", thread, len(d.FrameSizes), n, sum, d.Bytes)
		}
	}
}

// TestStackCallsOff records the same program without -stack-calls: the
// hooks return at once, and the trace has no record of them.
func TestStackCallsOff(t *testing.T) {
	prog, _ := buildWithStackUsage(t, src("stackuse.c"), "-finstrument-functions")
	res := recordCalls(t, prog, false)
	if res.Calls != 0 {
		t.Errorf("%d calls measured without -stack-calls", res.Calls)
	}
	for _, rec := range readTrace(t, res.Path) {
		if rec.Kind == trace.KindStackCalls || rec.Kind == trace.KindDeepestStack {
			t.Fatalf("a %v record without -stack-calls", rec.Kind)
		}
	}
}
