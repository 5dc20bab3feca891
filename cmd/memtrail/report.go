package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/report"
	"github.com/memtrail/memtrail/internal/trace"
)

func reportCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlags("report", "[options] trace", "memtrail report -view leaks -from 2s -to 3s prog.mtr", stderr)
	asJSON := fs.Bool("json", false, "write the report as JSON")
	view := fs.String("view", "summary", "what to show: "+viewNames())
	pid := fs.Uint64("pid", 0, "report on process `pid` (default: the program itself)")
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
	if err := parse(fs, args); err != nil {
		return 2, err
	}
	if fs.NArg() != 1 {
		return 2, usageError{"needs exactly one trace file"}
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	opts, aopts, err := reportOptions(set, reportFlags{view: *view, top: *top, frames: *frames, cost: *cost,
		chain: *chain, from: *from, to: *to, at: *at, threads: *threads, function: *function, file: *file,
		module: *module, ignore: *ignore, order: *order})
	if err != nil {
		return 2, err
	}
	opts.PID = *pid
	analyze := analyzeFile
	if *cache {
		analyze = analyzeCached
	}
	m, err := analyze(fs.Arg(0), aopts)
	if err != nil {
		return 1, err
	}
	if err := report.Write(stdout, m, opts, *asJSON); err != nil {
		return 1, err
	}
	return 0, nil
}

// reportFlags are the values of report's flags that need checking.
type reportFlags struct {
	view, cost, threads, function, file, module, ignore, order string
	top, frames, chain                                         int
	from, to, at                                               time.Duration
}

// reportOptions checks the flags of report and turns them into options
// of the report and of the analysis. set says which flags were given.
func reportOptions(set map[string]bool, f reportFlags) (report.Options, analysis.Options, error) {
	var opts report.Options
	var aopts analysis.Options
	if err := report.CheckView(f.view); err != nil {
		return opts, aopts, usageError{err.Error()}
	}
	if f.top < 1 || f.frames < 1 || f.chain < 1 {
		return opts, aopts, usageError{"-top, -frames and -chain must be at least 1"}
	}
	cost, err := analysis.ParseCost(f.cost)
	if err != nil {
		return opts, aopts, usageError{err.Error()}
	}
	opts = report.Options{View: f.view, Top: f.top, Frames: f.frames, Cost: cost, Chain: f.chain}
	switch f.order {
	case "size":
		opts.Objects = report.BySize
	case "age":
		opts.Objects = report.ByAge
	case "lifetime":
		opts.Objects = report.ByLifetime
	default:
		return opts, aopts, usageError{fmt.Sprintf("unknown order %q for -sort (orders: size, age, lifetime)", f.order)}
	}
	if aopts, err = windowOptions(set, f); err != nil {
		return opts, aopts, err
	}
	if f.view == "objects" {
		aopts.Objects = max(f.top, analysis.DefaultObjects)
	}
	if aopts.Threads, err = threadList(f.threads); err != nil {
		return opts, aopts, err
	}
	if aopts.Filter, err = stackFilter(f); err != nil {
		return opts, aopts, err
	}
	return opts, aopts, nil
}

// windowOptions checks -from, -to and -at.
func windowOptions(set map[string]bool, f reportFlags) (analysis.Options, error) {
	var aopts analysis.Options
	if set["at"] && (set["from"] || set["to"]) {
		return aopts, usageError{"-at cannot go with -from or -to"}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"from", f.from}, {"to", f.to}, {"at", f.at}} {
		if set[d.name] && d.v < 0 {
			return aopts, usageError{fmt.Sprintf("-%s %v is negative: times count from the start of the process", d.name, d.v)}
		}
	}
	if set["to"] && f.to == 0 || set["at"] && f.at == 0 {
		return aopts, usageError{"the window must end after the start of the process: nothing is allocated at 0"}
	}
	if set["to"] && f.to < f.from {
		return aopts, usageError{fmt.Sprintf("-to %v is before -from %v", f.to, f.from)}
	}
	aopts.From, aopts.To = uint64(f.from), uint64(f.to)
	if set["at"] {
		aopts.From, aopts.To = uint64(f.at), uint64(f.at)
	}
	return aopts, nil
}

func threadList(s string) ([]uint64, error) {
	if s == "" {
		return nil, nil
	}
	var list []uint64
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(part), 10, 64)
		if err != nil || n == 0 {
			return nil, usageError{fmt.Sprintf("-thread %q: a thread is a number from 1 (see -view threads)", part)}
		}
		list = append(list, n)
	}
	return list, nil
}

func stackFilter(f reportFlags) (analysis.StackFilter, error) {
	var filter analysis.StackFilter
	for _, re := range []struct {
		name, expr string
		dst        **regexp.Regexp
	}{{"function", f.function, &filter.Function}, {"file", f.file, &filter.File},
		{"module", f.module, &filter.Module}, {"ignore", f.ignore, &filter.Ignore}} {
		if re.expr == "" {
			continue
		}
		compiled, err := regexp.Compile(re.expr)
		if err != nil {
			return filter, usageError{fmt.Sprintf("-%s: %v", re.name, err)}
		}
		*re.dst = compiled
	}
	return filter, nil
}

func viewNames() string {
	var names []string
	for _, v := range report.Views() {
		names = append(names, v[0])
	}
	return strings.Join(names, ", ")
}

// analyzeCached analyzes the trace at path through its cache.
func analyzeCached(path string, opts analysis.Options) (*analysis.Model, error) {
	m, _, err := analysis.AnalyzeFile(path, opts)
	return m, err
}

// analyzeFile reads and analyzes the trace at path.
func analyzeFile(path string, opts analysis.Options) (*analysis.Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return analysis.Analyze(r, opts)
}
