package main

import (
	"fmt"
	"io"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/report"
	"github.com/memtrail/memtrail/internal/stackdepth"
)

func stackCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlags("stack", "[options] binary [trace]",
		"memtrail stack -su build/ ./prog prog.mtr", stderr)
	entry := fs.String("entry", "main", "the `function` whose worst case and deepest chain are shown")
	roots := fs.Bool("roots", false, "show every root (a function no other calls directly) instead of one entry; the deepest first, -top of them")
	var su listValue
	fs.Var(&su, "su", "gcc -fstack-usage `file` or directory of .su files whose frame sizes replace the binary's (may be repeated; default: the .su files beside the sources)")
	top := fs.Int("top", 10, "list the `n` largest frames with their source (0: none in text, all in JSON)")
	asJSON := fs.Bool("json", false, "write the report as JSON")
	if err := parse(fs, args); err != nil {
		return 2, err
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return 2, usageError{"needs a binary, and optionally a trace of it"}
	}
	a, err := stackdepth.Analyze(fs.Arg(0), stackdepth.Options{StackUsage: su})
	if err != nil {
		return 1, err
	}
	opts := report.StackOptions{Top: *top}
	switch {
	case *roots:
		opts.Entries = deepestRoots(a, *top)
	default:
		fn := a.Lookup(*entry)
		if fn == nil {
			return 1, fmt.Errorf("%s has no function %q (see -entry, or -roots)", fs.Arg(0), *entry)
		}
		opts.Entries = []*stackdepth.Function{fn}
	}
	if fs.NArg() == 2 {
		m, err := analyzeCached(fs.Arg(1), analysis.Options{})
		if err != nil {
			return 1, err
		}
		main := a.Lookup("main")
		if main == nil {
			main = opts.Entries[0]
		}
		if opts.Measured, err = stackdepth.Compare(a, m, fs.Arg(1), main); err != nil {
			return 1, err
		}
	}
	if *asJSON {
		err = report.WriteStackJSON(stdout, a, opts)
	} else {
		err = report.WriteStackText(stdout, a, opts)
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

// deepestRoots returns the n roots of a with the deepest worst cases (all
// for 0).
func deepestRoots(a *stackdepth.Analysis, n int) []*stackdepth.Function {
	roots := a.Roots()
	sortByDepth(roots)
	if n > 0 && len(roots) > n {
		roots = roots[:n]
	}
	return roots
}

func sortByDepth(fns []*stackdepth.Function) {
	for i := 1; i < len(fns); i++ {
		for j := i; j > 0 && fns[j].Depth > fns[j-1].Depth; j-- {
			fns[j], fns[j-1] = fns[j-1], fns[j]
		}
	}
}
