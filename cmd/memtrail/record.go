package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/memtrail/memtrail/internal/agent"
	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/demo"
	"github.com/memtrail/memtrail/internal/record"
	"github.com/memtrail/memtrail/internal/report"
)

func runCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlags("run", "[options] [--] program [arguments]",
		"memtrail run -o prog.mtr -- ./prog arg1 arg2", stderr)
	output := fs.String("o", "", "write the trace to `file` (default: <program>.<pid>.mtr in the current directory)")
	frames := fs.Int("max-frames", record.DefaultMaxFrames, fmt.Sprintf("record at most `n` frames of each call stack (1-%d); a deeper stack has a root frame saying how many were left out", record.MaxFramesLimit))
	quiet := fs.Bool("q", false, "print nothing but errors")
	ring := sizeFlag(fs, "ring-size", record.DefaultRingSize, "buffer between the program's first thread and memtrail, a power of two (e.g. 4MiB; other threads get a quarter): a bigger one absorbs longer bursts")
	stats := fs.Bool("stats", false, "print what recording cost: events, CPU time of the program and of memtrail, trace size, how long the program waited for memtrail")
	unit := fs.Duration("time-unit", record.DefaultTimeUnit, "resolution of event times, e.g. 1us or 1ms (the order of events is exact whatever it is)")
	stackCalls := fs.Bool("stack-calls", false, "measure the stack at every function entry and return of a program built with -finstrument-functions: the exact stack peak, step by step, and the call stack at its deepest (slower)")
	leakCheck := fs.Bool("leak-check", true, "at the program's normal exit, scan its memory and classify the blocks still allocated as memcheck does: definitely, indirectly and possibly lost, still reachable (-leak-check=false spares memtrail keeping the set of live blocks)")
	leakOrigins := fs.Bool("leak-origins", false, "at each free, note the blocks the freed block pointed to, so that each block definitely lost at exit is traced to the free that dropped its last pointer: where the leak was made (slower)")
	patchOwn := fs.Bool("patch-own-allocator", true, "record a program that defines malloc, free, operator new... itself by patching their entries to pass through memtrail (x86-64); what its allocator gives out before memtrail's agent starts or by other ways than those functions is not seen, and its release is counted as an uncertain free; -patch-own-allocator=false leaves such a program's allocator alone, unrecorded")
	checked := fs.Bool("check", false, "then check the trace against the budgets given (as memtrail check does): exit with 3 if one is broken")
	bf := addBudgetFlags(fs)
	// The options end at the program: what follows is its own.
	if err := parseInOrder(fs, args); err != nil {
		return 2, err
	}
	if *checked != bf.any() {
		return 2, usageError{"-check goes with at least one budget (-max-peak, -max-in-use-at-exit, -max-allocations), and budgets with -check"}
	}
	if *bf.allowDamaged && !*checked {
		return 2, usageError{"-allow-damaged goes with -check"}
	}
	sups, err := bf.suppressions()
	if err != nil {
		return 1, err
	}
	if fs.NArg() == 0 {
		return 2, usageError{"needs a program to run"}
	}
	if *leakOrigins && !*leakCheck {
		return 2, usageError{"-leak-origins needs the leak scan: it cannot go with -leak-check=false"}
	}
	if *frames < 1 || *frames > record.MaxFramesLimit {
		return 2, usageError{fmt.Sprintf("-max-frames %d is out of range (1-%d)", *frames, record.MaxFramesLimit)}
	}
	if *unit < time.Nanosecond || *unit > time.Second {
		return 2, usageError{fmt.Sprintf("-time-unit %v is out of range (1ns-1s)", *unit)}
	}
	if *ring < 64<<10 || *ring > 1<<30 || *ring&(*ring-1) != 0 {
		return 2, usageError{fmt.Sprintf("-ring-size %s must be a power of two from 64KiB to 1GiB", report.Size(*ring))}
	}
	res, err := recordProgram(record.Options{Args: fs.Args(), Output: *output, MaxFrames: *frames, TimeUnit: *unit,
		RingSize: *ring, StackCalls: *stackCalls, LeakScan: *leakCheck, LeakOrigins: *leakOrigins, LeaveOwnAllocator: !*patchOwn, Log: stderr})
	if errors.Is(err, record.ErrNotLoaded) {
		// The program ran: a failure of its own keeps its status.
		return max(res.Program.ExitCode(), 1), err
	}
	if err != nil {
		return 1, err
	}
	if *stackCalls && res.Calls == 0 && res.WriteErr == nil {
		fmt.Fprintln(stderr, "memtrail: -stack-calls: the program made no instrumented calls, so its stack was only sampled (build it with -finstrument-functions)")
	}
	if !*quiet && res.WriteErr == nil {
		printRecording(stderr, fs.Args(), res)
	}
	if *stats {
		printStats(stderr, res)
	}
	code := res.Program.ExitCode()
	if res.WriteErr != nil {
		if code == 0 {
			code = 1
		}
		return code, fmt.Errorf("the trace is incomplete: %w (what was written before is readable)", res.WriteErr)
	}
	if *checked {
		// stdout is the program's: the verdict goes with memtrail's
		// other words, on stderr. A program that failed keeps its own
		// status.
		checkCode, err := checkTrace(res.Path, bf, sups, report.ProcessID{}, 5, 8, false, stderr, stderr)
		if err != nil {
			return max(code, 1), err
		}
		if code == 0 {
			code = checkCode
		}
	}
	return code, nil
}

// recordProgram builds the agent if needed and records as opts say.
func recordProgram(opts record.Options) (*record.Result, error) {
	agentPath, err := agent.Path("")
	if err != nil {
		return nil, err
	}
	opts.AgentPath = agentPath
	opts.Version = "memtrail " + version
	return record.Run(opts)
}

// printRecording writes the short summary after a recording: how the
// program ended, its totals, and where the trace is. It takes its numbers
// from the recorder, not from an analysis of the trace, so that it costs
// nothing however long the run.
func printRecording(w io.Writer, args []string, res *record.Result) {
	procs := ""
	if res.Processes > 1 {
		procs = fmt.Sprintf(" in %d processes", res.Processes)
	}
	fmt.Fprintf(w, "memtrail: %s %s after %s: %s, %s, %s allocated%s\n",
		report.CommandLine(args), report.Ending(res.Program.How, res.Program.Code), report.Duration(res.RunTime),
		report.Plural(res.Allocations, "allocation"), report.Plural(res.Frees, "free"), report.Size(res.BytesAllocated), procs)
	if res.Lost > 0 {
		fmt.Fprintf(w, "memtrail: %s lost (the report says which and why)\n", report.Plural(res.Lost, "event"))
	}
	printUnrecorded(w, res)
	fmt.Fprintf(w, "memtrail: trace written to %s; see where the memory went with: memtrail report %s\n", res.Path, res.Path)
}

// printUnrecorded names the processes whose exec'd program was not
// recorded, and why: they would otherwise be missing without a word.
func printUnrecorded(w io.Writer, res *record.Result) {
	for _, u := range res.Unrecorded {
		if u.Static {
			fmt.Fprintf(w, "memtrail: not recorded: statically linked: %s, exec'd by process %d (%s)\n",
				report.Printable(u.Program), u.PID, report.Printable(u.Exe))
		} else {
			fmt.Fprintf(w, "memtrail: not recorded: the program process %d (%s) exec'd; the loader dropped memtrail (setuid or setgid?)\n",
				u.PID, report.Printable(u.Exe))
		}
	}
	if more := res.UnrecordedCount - len(res.Unrecorded); more > 0 {
		fmt.Fprintf(w, "memtrail: not recorded: %s more (memtrail report -processes lists them)\n", report.Plural(uint64(more), "program"))
	}
}

// printStats writes the cost of a recording, for benchmarks and the
// curious.
func printStats(w io.Writer, res *record.Result) {
	perEvent := 0.0
	if res.Events > 0 {
		perEvent = float64(res.Bytes) / float64(res.Events)
	}
	fmt.Fprintf(w, "memtrail: stats: %s from %s, %s lost; program CPU %.3f s; memtrail CPU %.3f s; trace %s (%.2f bytes/event); the program waited for memtrail %s, %.3f s\n",
		report.Plural(res.Events, "event"), report.Plural(uint64(res.Processes), "process"), report.Count(res.Lost),
		res.ProgramCPU.Seconds(), res.RecorderCPU.Seconds(), report.Plural(uint64(res.Bytes), "byte"), perEvent,
		report.Plural(res.Waits, "time"), res.WaitTime.Seconds())
}

func demoCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlags("demo", "", "memtrail demo", stderr)
	if err := parse(fs, args); err != nil {
		return 2, err
	}
	dir, err := os.MkdirTemp("", "memtrail-demo-")
	if err != nil {
		return 1, err
	}
	fmt.Fprintf(stderr, "memtrail: building the widget example of the mprof paper in %s\n", dir)
	prog, err := demo.Build(dir)
	if err != nil {
		return 1, err
	}
	res, err := recordProgram(record.Options{Args: []string{prog}, Output: dir + "/widget.mtr", LeakScan: true, Log: stderr})
	if err != nil {
		return 1, err
	}
	m, err := analysis.AnalyzeTrace(res.Path, analysis.Options{})
	if err != nil {
		return 1, err
	}
	if err := report.Text(stdout, m, report.Options{}); err != nil {
		return 1, err
	}
	fmt.Fprintf(stderr, "\nmemtrail: the trace is %s; try mprof's tables on it:\n  memtrail report -view leaks %s\n  memtrail report -view bins %s\n  memtrail report -view callgraph %s\nor look at it in your browser:\n  memtrail view %s\n",
		res.Path, res.Path, res.Path, res.Path, res.Path)
	return 0, nil
}
