// Package check holds the processes of a trace to memory budgets, for CI
// and for teams with a hard memory limit: the most heap live at once, the
// heap still in use at exit, the number of allocations. Leak suppressions,
// in LeakSanitizer's and valgrind's formats, take the call stacks they
// match out of the in-use-at-exit budget. A broken budget comes with the
// call stacks that weigh most in it.
package check

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
)

// Kind is what a budget limits.
type Kind int

const (
	Peak           Kind = iota // bytes live at the peak
	InUseAtExit                // bytes still allocated at exit, but for suppressed stacks
	Allocations                // allocations made
	DefinitelyLost             // bytes definitely lost at exit (memtrail run, unless -leak-check=false)
	IndirectlyLost             // bytes indirectly lost at exit
	PossiblyLost               // bytes possibly lost at exit
)

// String returns the kind as the report writes it.
func (k Kind) String() string {
	return [...]string{"peak heap", "in use at exit", "allocations", "definitely lost", "indirectly lost", "possibly lost"}[k]
}

// Flag returns the command-line flag that sets a budget of the kind.
func (k Kind) Flag() string {
	return [...]string{"max-peak", "max-in-use-at-exit", "max-allocations", "max-definitely-lost", "max-indirectly-lost", "max-possibly-lost"}[k]
}

// IsLeakClass reports whether budgets of the kind need the leak scan at
// exit.
func (k Kind) IsLeakClass() bool { return k >= DefinitelyLost }

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
	// first: at most the number asked for; for a leak class, Amounts are
	// the bytes of that class of each.
	Sites   []*analysis.Site
	Amounts []uint64
}

// Use is what one suppression took out of in use at exit.
type Use struct {
	Suppression   *Suppression
	Bytes, Blocks uint64
}

// Unjudged says why the budgets of processes procs of the trace analyzed
// in m cannot be judged, or "" if they can: a trace that is damaged, cut
// short, or whose processes lost events holds less than the program did,
// so a program that broke a budget could pass.
func Unjudged(m *analysis.Model, procs []*analysis.Process) string {
	var why []string
	if m.Damaged {
		why = append(why, "parts of it could not be read")
	}
	if !m.Complete {
		why = append(why, "it has no end record, for it was cut short or its recording stopped before finishing")
	}
	for _, p := range procs {
		if p.Lost > 0 {
			why = append(why, fmt.Sprintf("process %d lost %d of its events", p.PID, p.Lost))
		}
	}
	return strings.Join(why, "; ")
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
		if b.Kind.IsLeakClass() {
			v.Results = append(v.Results, leakResult(p, b, sups, top))
			continue
		}
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

// leakResult holds p to a budget of a leak class. The definitely lost
// bytes are those of the chains' leads, the indirectly lost those hanging
// from them, the possibly lost by theirs, each by its own call stack, and
// a suppression of its class matching that stack takes them out. p must
// have a leak scan (see analysis.Process.LeakClasses).
func leakResult(p *analysis.Process, b Budget, sups []*Suppression, top int) Result {
	r := Result{Budget: b}
	scan, _ := p.LeakClasses()
	siteOf := make(map[uint64]*analysis.Site, len(p.Sites))
	for i := range p.Sites {
		if !p.Sites[i].Inherited {
			siteOf[p.Sites[i].Stack] = &p.Sites[i]
		}
	}
	suppressed := func(stack uint64, kind string) bool {
		frames := p.Stack(stack)
		for _, s := range sups {
			if s.MatchesKind(kind) && s.Matches(frames) {
				return true
			}
		}
		return false
	}
	// Bytes by stack, to rank the stacks by.
	bytes := map[uint64]uint64{}
	switch b.Kind {
	case DefinitelyLost:
		r.Actual = scan.DefinitelyLostBytes
		for _, c := range p.LostChains {
			lead := c.Bytes
			for _, h := range c.Hanging {
				lead -= h.Bytes
			}
			if suppressed(c.Stack, "definite") {
				r.Actual -= min(lead, r.Actual)
			} else {
				bytes[c.Stack] += lead
			}
		}
	case IndirectlyLost:
		r.Actual = scan.IndirectlyLostBytes
		for _, c := range p.LostChains {
			for _, h := range c.Hanging {
				if suppressed(h.Stack, "indirect") {
					r.Actual -= min(h.Bytes, r.Actual)
				} else {
					bytes[h.Stack] += h.Bytes
				}
			}
		}
	case PossiblyLost:
		r.Actual = scan.PossiblyLostBytes
		for _, h := range p.PossiblyLost {
			if suppressed(h.Stack, "possible") {
				r.Actual -= min(h.Bytes, r.Actual)
			} else {
				bytes[h.Stack] += h.Bytes
			}
		}
	}
	if p.InheritedLeftOut {
		// The scan classified every block of the child, those it
		// inherited too; the chains hold only its own.
		r.Actual = 0
		for _, n := range bytes {
			r.Actual += n
		}
	}
	r.Broken = r.Actual > b.Limit
	stacks := make([]uint64, 0, len(bytes))
	for stack := range bytes {
		stacks = append(stacks, stack)
	}
	slices.SortFunc(stacks, func(a, c uint64) int {
		if d := cmp.Compare(bytes[c], bytes[a]); d != 0 {
			return d
		}
		return cmp.Compare(a, c)
	})
	for _, stack := range stacks[:min(top, len(stacks))] {
		if s := siteOf[stack]; s != nil {
			r.Sites = append(r.Sites, s)
			r.Amounts = append(r.Amounts, bytes[stack])
		}
	}
	return r
}
