package analysis_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace"
	"github.com/memtrail/memtrail/internal/trace/tracetext"
)

// TestTraces analyzes each trace of testdata and compares what the model
// says with the "# want" lines of the trace: the expected facts, worked out
// by hand from the events, in the form facts writes them.
func TestTraces(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no traces in testdata")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			text, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			opts, extra := testOptions(t, string(text))
			if !opts.Filter.IsZero() {
				opts.Stacks = analyzeText(t, string(text))
			}
			m := analyzeTextWith(t, string(text), opts)
			if got, want := facts(m, extra...), wantedFacts(string(text)); got != want {
				t.Errorf("facts differ (-want +got):\n%s", lineDiff(want, got))
			}
		})
	}
}

// analyzeText encodes a trace in text form and analyzes it.
func analyzeText(t testing.TB, text string) *analysis.Model {
	return analyzeTextWith(t, text, analysis.Options{})
}

func analyzeTextWith(t testing.TB, text string, opts analysis.Options) *analysis.Model {
	t.Helper()
	data, err := tracetext.Encode(text)
	if err != nil {
		t.Fatal(err)
	}
	return analyzeBytesWith(t, data, opts)
}

func analyzeBytes(t testing.TB, data []byte) *analysis.Model {
	return analyzeBytesWith(t, data, analysis.Options{})
}

func analyzeBytesWith(t testing.TB, data []byte, opts analysis.Options) *analysis.Model {
	t.Helper()
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	m, err := analysis.Analyze(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// testOptions reads the options a trace of testdata asks to be analyzed
// with, from a line "# options from=N to=N threads=I,J objects=N
// inherited=left-out", and
// the kinds of facts it checks beyond the common ones, from a line
// "# facts KIND...": thread, bin, size, sizecat, lifetimes, objects,
// timeline, window.
func testOptions(t *testing.T, text string) (analysis.Options, []string) {
	var opts analysis.Options
	var extra []string
	for line := range strings.Lines(text) {
		if rest, ok := strings.CutPrefix(line, "# facts "); ok {
			extra = append(extra, strings.Fields(rest)...)
		}
		rest, ok := strings.CutPrefix(line, "# options ")
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(rest) {
			key, val, _ := strings.Cut(kv, "=")
			switch key {
			case "from":
				opts.From = mustUint(t, val)
			case "to":
				opts.To = mustUint(t, val)
			case "threads":
				for _, th := range strings.Split(val, ",") {
					opts.Threads = append(opts.Threads, mustUint(t, th))
				}
			case "objects":
				opts.Objects = int(mustUint(t, val))
			case "function":
				opts.Filter.Function = regexp.MustCompile(val)
			case "ignore":
				opts.Filter.Ignore = regexp.MustCompile(val)
			case "inherited":
				opts.LeaveOutInherited = val == "left-out"
			default:
				t.Fatalf("unknown option %q", key)
			}
		}
	}
	return opts, extra
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// wantedFacts returns the "# want " lines of a trace, without the prefix.
func wantedFacts(text string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if rest, ok := strings.CutPrefix(line, "# want "); ok {
			b.WriteString(strings.TrimRight(rest, " \t\r\n"))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// facts writes what a model says, one fact a line:
//
//	process ID pid=P forked=F threads=N lost=N end=HOW/CODE start=T run=D
//	summary allocs=N frees=N bytes=N peak=BYTES@TIME exit=BYTES/BLOCKS temporary=N invalid=N inherited=N replaced=N
//	uncertain frees=N (only if there are some)
//	site STACK allocs=N bytes=N frees=N peak=BYTES/BLOCKS exit=BYTES/BLOCKS temporary=N
//	problem KIND xCOUNT size=N alloc=API@STACK free=API@STACK first-free=STACK
//	warning TEXT
//
// with a site line for each site and a problem line for each problem of
// the process above them, and after them the facts of the extra kinds
// asked for (see extraFacts). end is "none" for a process whose end is not in
// the trace.
func facts(m *analysis.Model, extra ...string) string {
	var b strings.Builder
	for _, p := range m.Processes {
		end := "none"
		if p.Ended {
			end = fmt.Sprintf("%s/%d", howName(p.How), p.Code)
		}
		fmt.Fprintf(&b, "process %d pid=%d forked=%v threads=%d lost=%d end=%s start=%d run=%d\n",
			p.ID, p.PID, p.Forked, len(p.Threads), p.Lost, end, p.Start, p.RunTime())
		s := p.Summary
		fmt.Fprintf(&b, "summary allocs=%d frees=%d bytes=%d peak=%d@%d exit=%d/%d temporary=%d invalid=%d replaced=%d\n",
			s.Allocations, s.Frees, s.BytesAllocated, s.PeakBytes, s.PeakTime, s.InUseAtExitBytes,
			s.InUseAtExitBlocks, s.Temporary, s.InvalidFrees, s.ReplacedBlocks)
		if s.UncertainFrees > 0 {
			fmt.Fprintf(&b, "uncertain frees=%d\n", s.UncertainFrees)
		}
		for _, s := range p.Sites {
			inherited := ""
			if s.Inherited {
				inherited = " inherited"
			}
			fmt.Fprintf(&b, "site %d%s allocs=%d bytes=%d frees=%d peak=%d/%d exit=%d/%d temporary=%d\n",
				s.Stack, inherited, s.Allocations, s.BytesAllocated, s.Frees, s.PeakBytes, s.PeakBlocks,
				s.InUseAtExitBytes, s.InUseAtExitBlocks, s.Temporary)
		}
		for _, pr := range p.Problems {
			fmt.Fprintf(&b, "problem %s x%d size=%d alloc=%s@%d free=%s@%d first-free=%d\n",
				strings.ReplaceAll(pr.Kind.String(), " ", "-"), pr.Count, pr.Size,
				apiName(pr.AllocAPI), pr.AllocStack, apiName(pr.FreeAPI), pr.FreeStack, pr.FirstFreeStack)
		}
		for _, kind := range extra {
			extraFacts(&b, p, kind)
		}
	}
	for _, w := range m.Warnings {
		fmt.Fprintf(&b, "warning %s\n", w)
	}
	return b.String()
}

func howName(h trace.EndHow) string {
	return map[trace.EndHow]string{trace.EndUnknown: "unknown", trace.EndExited: "exited",
		trace.EndSignaled: "signaled", trace.EndExec: "exec", trace.EndRunning: "running"}[h]
}

func apiName(a trace.API) string {
	if a == trace.APIUnknown {
		return "-"
	}
	return strings.ReplaceAll(a.String(), " ", "_")
}

// lineDiff shows the lines of want and got that differ, as a minimal
// diff would, good enough for a few dozen lines.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	// Longest common subsequence, then walk it.
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

// TestMprofWidgets replays the widget example at the size of mprof's
// paper, 10,000 widgets of which 5,019 red, and finds its numbers: 2,040,000
// bytes allocated, 1,023,876 bytes in 5,019 blocks never freed.
func TestMprofWidgets(t *testing.T) {
	m := analyzeText(t, scaledWidgets(t, 10000))
	p := m.Processes[0]
	s := p.Summary
	if s.Allocations != 10000 || s.BytesAllocated != 2040000 || s.Frees != 4981 || s.PeakBytes != 2040000 ||
		s.InUseAtExitBytes != 1023876 || s.InUseAtExitBlocks != 5019 {
		t.Errorf("summary %+v", s)
	}
	if top := p.TopSites(analysis.ByInUseAtExit, 0); len(top) != 1 || top[0].Stack != 9 {
		t.Errorf("in use at exit from %d sites, want only the red widgets'", len(top))
	}
}

// scaledWidgets returns the widget trace of testdata with n widgets
// instead of 12. Widget i is red if i*7919 mod n < 0.5019n: 5,019 of
// 10,000 are, as in mprof's paper.
func scaledWidgets(t testing.TB, n int) string {
	t.Helper()
	small, err := os.ReadFile("testdata/widget.txt")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for line := range strings.Lines(string(small)) {
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

// extraFacts writes the facts of one kind of a process, those a trace of
// testdata asks for on a "# facts" line:
//
//	window from=N to=N
//	thread INDEX tid=T allocs=N bytes=N frees=N peak=BYTES@TIME exit=BYTES
//	bin SIZE allocs=N bytes=N frees=N kept=BYTES/BLOCKS      (bins that are not empty)
//	size BUCKET allocs=N bytes=N                               (buckets that are not empty)
//	sizecat STACK CAT allocs=N bytes=N kept=BYTES/BLOCKS       (categories that are not empty)
//	lifetimes STACK time=BUCKET:N,... allocs=BUCKET:N,...      (sites that freed objects)
//	object LIST addr=A size=N allocated=T freed=T thread=N reallocs=N stack=STACK
//	timeline start=T step=S points=N
//	point I peak=BYTES/BLOCKS end=BYTES/BLOCKS allocs=N bytes=N frees=N freed=BYTES
func extraFacts(b *strings.Builder, p *analysis.Process, kind string) {
	switch kind {
	case "window":
		fmt.Fprintf(b, "window from=%d to=%d\n", p.Window.From, p.Window.To)
	case "thread":
		for _, th := range p.Threads {
			fmt.Fprintf(b, "thread %d tid=%d allocs=%d bytes=%d frees=%d peak=%d@%d exit=%d\n",
				th.Index, th.TID, th.Allocations, th.BytesAllocated, th.Frees, th.PeakBytes, th.PeakTime, th.InUseAtExitBytes)
		}
	case "stack":
		s := p.Summary
		fmt.Fprintf(b, "stack peak=%d@%d total=%d@%d\n", s.StackPeakBytes, s.StackPeakTime, s.PeakTotalBytes, s.PeakTotalTime)
		for _, th := range p.Threads {
			fmt.Fprintf(b, "stack thread %d peak=%d@%d sampled-only=%v\n", th.Index, th.StackPeakBytes, th.StackPeakTime, th.StackSampledOnly)
		}
		for i, pt := range p.Timeline.Points {
			if pt.StackBytes != 0 {
				fmt.Fprintf(b, "stack point %d %d\n", p.Timeline.Time(i), pt.StackBytes)
			}
		}
	case "deepest":
		fmt.Fprintf(b, "calls %d", p.Summary.StackCalls)
		for _, th := range p.Threads {
			fmt.Fprintf(b, " %d:%d", th.Index, th.StackCalls)
		}
		b.WriteString("\n")
		if d := p.Summary.DeepestStack; d.Bytes != 0 {
			fmt.Fprintf(b, "deepest thread=%d time=%d bytes=%d stack=%d entry=%v sizes=%v\n", d.Thread, d.Time, d.Bytes, d.Stack, d.FunctionEntry, d.FrameSizes)
		}
	case "bin":
		for size, bin := range p.Bins {
			if bin != (analysis.Bin{}) {
				fmt.Fprintf(b, "bin %d allocs=%d bytes=%d frees=%d kept=%d/%d\n",
					size, bin.Allocations, bin.Bytes, bin.Frees, bin.KeptBytes, bin.KeptBlocks)
			}
		}
	case "size":
		for i, sb := range p.Sizes {
			if sb != (analysis.SizeBucket{}) {
				fmt.Fprintf(b, "size %d allocs=%d bytes=%d\n", i, sb.Allocations, sb.Bytes)
			}
		}
	case "sizecat":
		for _, s := range p.Sites {
			for c, n := range s.BySize {
				if n != (analysis.SizeCount{}) {
					fmt.Fprintf(b, "sizecat %d %s allocs=%d bytes=%d kept=%d/%d\n",
						s.Stack, "smlx"[c:c+1], n.Allocations, n.Bytes, n.KeptBytes, n.KeptBlocks)
				}
			}
		}
	case "lifetimes":
		for _, s := range p.Sites {
			if s.Lifetimes != ([analysis.LifetimeBuckets]uint64{}) {
				fmt.Fprintf(b, "lifetimes %d time=%s allocs=%s\n", s.Stack, buckets(s.Lifetimes[:]), buckets(s.LifetimeAllocs[:]))
			}
		}
	case "objects":
		for _, list := range []struct {
			name string
			objs []analysis.HeapObject
		}{{"live", p.LiveObjects}, {"oldest", p.OldestObjects}, {"freed", p.FreedObjects}} {
			for _, o := range list.objs {
				fmt.Fprintf(b, "object %s addr=%#x size=%d allocated=%d freed=%d thread=%d reallocs=%d stack=%d\n",
					list.name, o.Addr, o.Size, o.Allocated, o.Freed, o.Thread, o.Reallocs, p.Sites[o.Site].Stack)
			}
		}
	case "timeline":
		tl := p.Timeline
		fmt.Fprintf(b, "timeline start=%d step=%d points=%d\n", tl.Start, tl.Step, len(tl.Points))
		for i, pt := range tl.Points {
			fmt.Fprintf(b, "point %d peak=%d/%d end=%d/%d allocs=%d bytes=%d frees=%d freed=%d\n", i,
				pt.PeakBytes, pt.PeakBlocks, pt.EndBytes, pt.EndBlocks, pt.Allocations, pt.BytesAllocated, pt.Frees, pt.BytesFreed)
		}
	}
}

// buckets writes the buckets of a histogram that are not empty, as
// BUCKET:COUNT pairs.
func buckets(h []uint64) string {
	var parts []string
	for i, n := range h {
		if n != 0 {
			parts = append(parts, fmt.Sprintf("%d:%d", i, n))
		}
	}
	return strings.Join(parts, ",")
}

// TestEventsBeforeStart analyzes a process whose first events, their times
// rounded down to the time unit, come before its start record's time: it
// starts with them, so that no time since its start and no age disagree.
func TestEventsBeforeStart(t *testing.T) {
	m := analyzeText(t, `info time-unit=1000000 command=[./prog]
process id=1 pid=100 time=1500000 exe=/bin/prog args=[prog]
thread process=1 index=1 tid=100
alloc process=1 thread=1 time=1000000 api=malloc addr=0x1000 size=16 stack=0
free process=1 thread=1 time=3000000 api=free addr=0x1000 stack=0
process-end id=1 time=4000000 how=exited code=0
end time=4000000 events=2
`)
	p := m.Processes[0]
	if p.Start != 1000000 || p.RunTime() != 3000000 {
		t.Errorf("the process starts at %d and runs %d ns; want 1000000 and 3000000", p.Start, p.RunTime())
	}
	o := p.FreedObjects[0]
	if o.Allocated < p.Start || o.Age(0) != 2000000 || o.Freed-p.Start != 2000000 {
		t.Errorf("the object: allocated at %d, freed at %d, age %d; the process started at %d", o.Allocated, o.Freed, o.Age(0), p.Start)
	}
}
