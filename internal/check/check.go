// Package check holds the processes of a trace to memory budgets, for CI
// and for teams with a hard memory limit: the most heap live at once, the
// heap still in use at exit, the number of allocations. Leak suppressions,
// in LeakSanitizer's and valgrind's formats, take the call stacks they
// match out of the in-use-at-exit budget. A broken budget comes with the
// call stacks that weigh most in it.
package check

import (
	"slices"

	"github.com/memtrail/memtrail/internal/analysis"
)

// Kind is what a budget limits.
type Kind int

const (
	Peak        Kind = iota // bytes live at the peak
	InUseAtExit             // bytes still allocated at exit, but for suppressed stacks
	Allocations             // allocations made
)

// String returns the kind as the report writes it.
func (k Kind) String() string {
	return [...]string{"peak heap", "in use at exit", "allocations"}[k]
}

// Flag returns the command-line flag that sets a budget of the kind.
func (k Kind) Flag() string {
	return [...]string{"max-peak", "max-in-use-at-exit", "max-allocations"}[k]
}

// IsBytes reports whether budgets of the kind are in bytes.
func (k Kind) IsBytes() bool { return k != Allocations }

// Budget is the most a process may reach of one kind.
type Budget struct {
	Kind  Kind
	Limit uint64
}

// Verdict is how one process fared against the budgets.
type Verdict struct {
	Process *analysis.Process
	Results []Result // one per budget, in the order given
	// Suppressed is what the suppressions took out of in use at exit, and
	// Used what each matched, in the order of the suppressions.
	Suppressed struct{ Bytes, Blocks uint64 }
	Used       []Use
}

// Broken reports whether the process broke any budget.
func (v *Verdict) Broken() bool {
	return slices.ContainsFunc(v.Results, func(r Result) bool { return r.Broken })
}

// Result is how a process fared against one budget.
type Result struct {
	Budget
	Actual uint64
	Broken bool
	// Sites are the call stacks that weigh most in Actual, the heaviest
	// first: at most the number asked for.
	Sites []*analysis.Site
}

// Use is what one suppression took out of in use at exit.
type Use struct {
	Suppression   *Suppression
	Bytes, Blocks uint64
}

// Check holds process p to the budgets, with the suppressions, and lists
// at most top call stacks for each budget.
func Check(p *analysis.Process, budgets []Budget, sups []*Suppression, top int) Verdict {
	v := Verdict{Process: p}
	suppressed := make(map[*analysis.Site]bool)
	used := make([]Use, len(sups))
	for i := range p.Sites {
		s := &p.Sites[i]
		if s.InUseAtExitBytes == 0 && s.InUseAtExitBlocks == 0 {
			continue
		}
		frames := p.SiteStack(s)
		for j, sup := range sups {
			if sup.Matches(frames) {
				suppressed[s] = true
				used[j].Bytes += s.InUseAtExitBytes
				used[j].Blocks += s.InUseAtExitBlocks
				v.Suppressed.Bytes += s.InUseAtExitBytes
				v.Suppressed.Blocks += s.InUseAtExitBlocks
				break // a block counts for the first that matches, as in valgrind
			}
		}
	}
	for j, sup := range sups {
		if used[j].Blocks > 0 {
			used[j].Suppression = sup
			v.Used = append(v.Used, used[j])
		}
	}
	for _, b := range budgets {
		r := Result{Budget: b}
		var order analysis.SiteOrder
		switch b.Kind {
		case Peak:
			r.Actual, order = p.Summary.PeakBytes, analysis.ByPeak
		case InUseAtExit:
			r.Actual, order = p.Summary.InUseAtExitBytes-v.Suppressed.Bytes, analysis.ByInUseAtExit
		case Allocations:
			r.Actual, order = p.Summary.Allocations, analysis.ByAllocations
		}
		r.Broken = r.Actual > b.Limit
		for _, s := range p.TopSites(order, 0) {
			if len(r.Sites) == top {
				break
			}
			if b.Kind != InUseAtExit || !suppressed[s] {
				r.Sites = append(r.Sites, s)
			}
		}
		v.Results = append(v.Results, r)
	}
	return v
}
