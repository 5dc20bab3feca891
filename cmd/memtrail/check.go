package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/check"
	"github.com/memtrail/memtrail/internal/report"
)

// budgetBroken is the exit status of memtrail check, and of memtrail run
// -check, when a budget is broken.
const budgetBroken = 3

func checkCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlags("check", "[options] trace",
		"memtrail check -max-peak 64MiB -max-in-use-at-exit 0 -suppressions lsan.supp prog.mtr", stderr)
	bf := addBudgetFlags(fs)
	pid := addPIDFlag(fs, "pid", "check only process `pid`, or image N of a pid that exec'd with pid.N (default: every process of the trace)")
	asJSON := fs.Bool("json", false, "write the verdict as JSON")
	top := fs.Int("top", 5, "show the `n` call stacks that weigh most in each broken budget")
	frames := fs.Int("frames", 8, "show at most `n` frames of each call stack (text only)")
	if err := parse(fs, args); err != nil {
		return 2, err
	}
	if fs.NArg() != 1 {
		return 2, usageError{"needs exactly one trace file"}
	}
	if !bf.any() {
		return 2, usageError{"needs at least one budget: -max-peak, -max-in-use-at-exit or -max-allocations"}
	}
	sups, err := bf.suppressions()
	if err != nil {
		return 1, err
	}
	return checkTrace(fs.Arg(0), bf, sups, pid.ProcessID, *top, *frames, *asJSON, stdout, stderr)
}

// checkTrace holds the processes of the trace at path (or process pid) to
// the budgets of bf and writes the verdict to stdout, and diagnostics to
// stderr; it returns budgetBroken if one is broken.
func checkTrace(path string, bf *budgetFlags, sups []*check.Suppression, pid report.ProcessID, top, frames int, asJSON bool, stdout, stderr io.Writer) (int, error) {
	budgets := bf.budgets()
	// A fork child is held to the budgets for what it did itself: the
	// heap it inherited is its parent's, which has its own verdict.
	m, err := analyzeCached(path, analysis.Options{LeaveOutInherited: !*bf.inherited})
	if err != nil {
		return 1, err
	}
	procs := m.Processes
	if pid.PID != 0 {
		p, err := report.PickID(m, pid)
		if err != nil {
			return 1, err
		}
		procs = []*analysis.Process{p}
	}
	if len(procs) == 0 {
		return 1, fmt.Errorf("%s holds no process", path)
	}
	if why := check.Unjudged(m, procs); why != "" {
		if !*bf.allowDamaged {
			return 1, fmt.Errorf("%s cannot be judged: %s; -allow-damaged judges what was read", path, why)
		}
		fmt.Fprintf(stderr, "memtrail: judging what was read of %s: %s\n", path, why)
	}
	var verdicts []check.Verdict
	code := 0
	for _, p := range procs {
		for _, b := range budgets {
			if _, why := p.LeakClasses(); b.Kind.IsLeakClass() && why != "" {
				return 1, fmt.Errorf("-%s: process %d has no leak classes: %s", b.Kind.Flag(), p.PID, why)
			}
		}
		v := check.Check(p, budgets, sups, top)
		if v.Broken() {
			code = budgetBroken
		}
		verdicts = append(verdicts, v)
	}
	if asJSON {
		err = report.CheckJSON(stdout, m, verdicts)
	} else {
		err = report.CheckText(stdout, m, verdicts, report.Options{Frames: frames, Color: colored(stdout)})
	}
	if err != nil {
		return 1, err
	}
	return code, nil
}

// budgetFlags are the flags that set budgets, of memtrail check and run.
type budgetFlags struct {
	fs          *flag.FlagSet
	peak        *uint64
	inUse       *uint64
	allocations *uint64
	lost        [3]*uint64 // definitely, indirectly and possibly lost
	supps       listValue
	inherited   *bool
	// allowDamaged judges a damaged or incomplete trace by what could be
	// read of it.
	allowDamaged *bool
}

func addBudgetFlags(fs *flag.FlagSet) *budgetFlags {
	bf := &budgetFlags{fs: fs}
	bf.peak = sizeFlag(fs, "max-peak", 0, "the most heap a process may have live at once (e.g. 64MiB)")
	bf.inUse = sizeFlag(fs, "max-in-use-at-exit", 0, "the most heap a process may leave allocated at exit, but for suppressed call stacks (e.g. 0)")
	bf.allocations = fs.Uint64("max-allocations", 0, "the most allocations a process may make")
	for i, k := range []check.Kind{check.DefinitelyLost, check.IndirectlyLost, check.PossiblyLost} {
		bf.lost[i] = sizeFlag(fs, k.Flag(), 0, "the most heap a process may leave "+k.String()+" at exit (needs the leak scan at exit, which memtrail run makes unless -leak-check=false)")
	}
	bf.inherited = fs.Bool("include-inherited", false, "hold a fork child to the budgets with the heap it inherited from its parent, as valgrind counts it (by default, only what it allocated itself counts)")
	bf.allowDamaged = fs.Bool("allow-damaged", false, "judge a trace that is damaged, cut short or lost events by what could be read of it, instead of failing with status 1")
	fs.Var(&bf.supps, "suppressions", "leak suppressions, LeakSanitizer's leak:PATTERN lines or valgrind's Memcheck:Leak blocks, from `file` (may be repeated)")
	return bf
}

// given reports whether the flag name was set.
func (bf *budgetFlags) given(name string) bool {
	set := false
	bf.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func (bf *budgetFlags) any() bool {
	return len(bf.budgets()) > 0
}

// budgets returns the budgets set, in a fixed order.
func (bf *budgetFlags) budgets() []check.Budget {
	var bs []check.Budget
	for _, b := range []struct {
		kind  check.Kind
		limit *uint64
	}{{check.Peak, bf.peak}, {check.InUseAtExit, bf.inUse}, {check.Allocations, bf.allocations},
		{check.DefinitelyLost, bf.lost[0]}, {check.IndirectlyLost, bf.lost[1]}, {check.PossiblyLost, bf.lost[2]}} {
		if bf.given(b.kind.Flag()) {
			bs = append(bs, check.Budget{Kind: b.kind, Limit: *b.limit})
		}
	}
	return bs
}

// suppressions reads the suppression files.
func (bf *budgetFlags) suppressions() ([]*check.Suppression, error) {
	var all []*check.Suppression
	for _, path := range bf.supps {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		sups, err := check.Parse(f, path)
		f.Close()
		if err != nil {
			return nil, err
		}
		all = append(all, sups...)
	}
	return all, nil
}

// listValue is a flag that may be given several times.
type listValue []string

func (l *listValue) String() string { return strings.Join(*l, ",") }

func (l *listValue) Set(s string) error {
	*l = append(*l, s)
	return nil
}
