package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/report"
	"github.com/memtrail/memtrail/internal/web"
)

// analysisGCPercent is the garbage collector's GOGC while memtrail
// report runs, unless GOGC says otherwise. Most of what the analysis holds
// is its table of the live blocks, which has no pointers: a collection
// need not scan it and costs little, while the default of 100 lets the
// heap grow to twice what is live before one. Then memory follows the
// live blocks more closely.
const analysisGCPercent = 50

// analysisGCFloor is the heap below which the garbage collector does not
// collect while memtrail report runs (unless GOGC is set): an analysis's
// heap mostly grows, and at analysisGCPercent one that grows from nothing
// to a hundred megabytes is collected a dozen times on the way, at 3, 4,
// 6, 9 MB..., each collection scanning all that is live.
const analysisGCFloor = 64 << 20

func reportCmd(args []string, stdout, stderr io.Writer) (int, error) {
	if os.Getenv("GOGC") == "" {
		defer floorGC(analysisGCPercent, analysisGCFloor)()
	}
	fs := newFlags("report", "[options] trace", "memtrail report -view leaks -from 2s -to 3s prog.mtr", stderr)
	asJSON := fs.Bool("json", false, "write the report as JSON")
	view := fs.String("view", "summary", "what to show: "+viewNames())
	pid := addPIDFlag(fs, "pid", "report on process `pid`, or on image N of a pid that exec'd with pid.N (default: the program itself; a pid alone: its last image)")
	processes := fs.Bool("processes", false, "list every process of the trace, as -pid names them")
	top := fs.Int("top", 10, "show the top `n` call stacks (or objects) of each table")
	frames := fs.Int("frames", 8, "show at most `n` frames of each call stack (text only)")
	cost := fs.String("cost", "peak", "what the trees (top-down, bottom-up, callers) weigh stacks by: allocations, allocated, peak, leaked or temporary")
	chain := fs.Int("chain", 5, "callers in the partial call chains of the leak table")
	from := fs.Duration("from", 0, "analyze from `time` after the start of the process (e.g. 1.5s, 200ms)")
	to := fs.Duration("to", 0, "analyze up to `time` after the start of the process (default: its end)")
	at := fs.Duration("at", 0, "show the state at `time` after the start of the process")
	threads := fs.String("thread", "", "keep only the blocks allocated by these threads (indexes, comma-separated; see -view threads)")
	function := fs.String("function", "", "keep only the call stacks with a function matching `regexp`")
	file := fs.String("file", "", "keep only the call stacks with a source file matching `regexp`")
	module := fs.String("module", "", "keep only the call stacks with code in an object file matching `regexp`")
	ignore := fs.String("ignore", "", "leave out the call stacks with a function matching `regexp`")
	order := fs.String("sort", "size", "order of the object list: size, age (of the objects live at the end) or lifetime (of those freed)")
	cache := fs.Bool("cache", true, "keep the analysis in TRACE.cache, and read it from there when the trace has not changed")
	suDir := fs.String("su", "", "frame sizes for the deepest stack from the .su files of gcc -fstack-usage under `dir`")
	html := fs.String("html", "", "write one self-contained HTML page of the timeline, the flame graph and the leaks to `file`")
	if err := parse(fs, args); err != nil {
		return 2, err
	}
	if fs.NArg() != 1 {
		return 2, usageError{"needs exactly one trace file"}
	}
	if *processes {
		return listProcesses(fs, *asJSON, stdout)
	}
	if *html != "" {
		var others []string
		fs.Visit(func(fl *flag.Flag) {
			if fl.Name != "html" && fl.Name != "pid" {
				others = append(others, "-"+fl.Name)
			}
		})
		if len(others) > 0 {
			return 2, usageError{fmt.Sprintf("-html goes with -pid only, not with %s", strings.Join(others, ", "))}
		}
		return writeHTML(fs.Arg(0), pid.ProcessID, *html)
	}
	req := report.Request{View: *view, Top: *top, Frames: *frames, Cost: *cost, Chain: *chain,
		From: *from, To: *to, At: *at, Threads: *threads, Function: *function, File: *file,
		Module: *module, Ignore: *ignore, Order: *order, Given: map[string]bool{}}
	fs.Visit(func(fl *flag.Flag) { req.Given[fl.Name] = true })
	opts, aopts, err := req.Options()
	if err != nil {
		return 2, usageError{err.Error()}
	}
	opts.PID, opts.Image = pid.PID, pid.Image
	if *suDir != "" {
		if opts.StackUsage, err = report.ReadStackUsage(*suDir); err != nil {
			return 1, err
		}
	}
	analyze := func(path string, opts analysis.Options) (*analysis.Model, error) {
		opts.Progress = progressBar(progress, path)
		return analysis.AnalyzeTrace(path, opts)
	}
	if *cache {
		analyze = analyzeCached
	}
	m, err := analyze(fs.Arg(0), aopts)
	if err != nil {
		return 1, err
	}
	for _, w := range report.FilterWarnings(m, opts, aopts) {
		fmt.Fprintf(stderr, "memtrail: warning: %s\n", w)
	}
	if err := report.Write(stdout, m, opts, *asJSON); err != nil {
		return 1, err
	}
	return 0, nil
}

// listProcesses writes the list of report -processes, which goes with
// -json alone.
func listProcesses(fs *flag.FlagSet, asJSON bool, stdout io.Writer) (int, error) {
	var others []string
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name != "processes" && fl.Name != "json" && fl.Name != "cache" {
			others = append(others, "-"+fl.Name)
		}
	})
	if len(others) > 0 {
		return 2, usageError{fmt.Sprintf("-processes goes with -json only, not with %s", strings.Join(others, ", "))}
	}
	m, err := analyzeCached(fs.Arg(0), analysis.Options{})
	if err != nil {
		return 1, err
	}
	if err := report.ProcessList(stdout, m, asJSON); err != nil {
		return 1, err
	}
	return 0, nil
}

// viewNames lists the names of report's views, for its help.
func viewNames() string { return strings.Join(viewList(), ", ") }

// viewList returns the names of report's views, in their order.
func viewList() []string {
	var names []string
	for _, v := range report.Views() {
		names = append(names, v[0])
	}
	return names
}

// analyzeCached analyzes the trace at path through its cache.
// The reading of a trace shows its progress on progress, if it is a
// terminal.
func analyzeCached(path string, opts analysis.Options) (*analysis.Model, error) {
	if opts.Progress == nil {
		opts.Progress = progressBar(progress, path)
	}
	m, _, err := analysis.AnalyzeFile(path, opts)
	return m, err
}

// progress is where long work shows its progress: the stderr of run.
var progress io.Writer

// writeHTML writes the page of report -html.
func writeHTML(trace string, id report.ProcessID, path string) (int, error) {
	var page bytes.Buffer
	if err := web.WriteHTML(&page, trace, id); err != nil {
		return 1, err
	}
	if err := os.WriteFile(path, page.Bytes(), 0o600); err != nil { // what the trace holds, as private
		return 1, err
	}
	return 0, nil
}

// floorGC makes the garbage collector keep the heap at most percent above
// what is live, as GOGC does, but let it reach floor bytes before it
// collects; the returned func puts GOGC back. After each collection it
// sets the GOGC that makes the next one come at floor, or at percent if
// that comes later.
func floorGC(percent int, floor uint64) (restore func()) {
	var done atomic.Bool
	// Before the first collection, the runtime collects at 4 MB times
	// GOGC / 100.
	before := debug.SetGCPercent(max(percent, int(floor/(4<<20)*100)))
	var rearm func(*gcMark)
	rearm = func(*gcMark) {
		if done.Load() {
			return
		}
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(live)
		p := percent
		if n := live[0].Value.Uint64(); n > 0 && n < floor {
			p = max(percent, int((floor-n)*100/n))
		}
		debug.SetGCPercent(p)
		runtime.SetFinalizer(new(gcMark), rearm)
	}
	runtime.SetFinalizer(new(gcMark), rearm)
	return func() {
		done.Store(true)
		debug.SetGCPercent(before)
	}
}

// gcMark is an object whose finalizer runs after the collection that finds
// it unreachable. Not a tiny object: those share their memory, and their
// finalizers may never run.
type gcMark struct{ _ [16]byte }
