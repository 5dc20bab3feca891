package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/memtrail/memtrail/internal/analysis"
)

// diffCost is a cost memtrail diff compares: by stack, and in total.
type diffCost struct {
	cost  analysis.Cost
	title string
	total func(*analysis.Summary) uint64
}

// diffCosts are what memtrail diff compares, in its order.
var diffCosts = []diffCost{
	{analysis.CostPeak, "peak heap", func(s *analysis.Summary) uint64 { return s.PeakBytes }},
	{analysis.CostAllocated, "bytes allocated", func(s *analysis.Summary) uint64 { return s.BytesAllocated }},
	{analysis.CostAllocations, "allocations", func(s *analysis.Summary) uint64 { return s.Allocations }},
	{analysis.CostLeaked, "in use at exit", func(s *analysis.Summary) uint64 { return s.InUseAtExitBytes }},
}

// amount writes n of cost c.
func amount(c analysis.Cost, n uint64) string {
	if c.IsBytes() {
		return Size(n)
	}
	return Count(n)
}

// change writes how much n of cost c changed: +1.5 KiB, -3, 0.
func change(c analysis.Cost, d int64) string {
	switch {
	case d > 0:
		return "+" + amount(c, uint64(d))
	case d < 0:
		return "-" + amount(c, uint64(-d))
	}
	return "0"
}

// growth writes the change from old to new in percent, if old is not 0.
func growth(old, new uint64) string {
	if old == 0 {
		if new == 0 {
			return ""
		}
		return " (new)"
	}
	return fmt.Sprintf(" (%+.1f%%)", (float64(new)-float64(old))*100/float64(old))
}

// DiffText writes memtrail diff's comparison of two runs as text: the
// totals, then for each cost the call stacks that grew and shrank most.
// oldID and newID name the processes as -pid does in their traces.
func DiffText(w io.Writer, oldP, newP *analysis.Process, oldID, newID ProcessID, changes []analysis.StackChange, opts Options) error {
	t := &textReport{p: newP, opts: opts}
	t.printf("old: %s  (pid %s)\nnew: %s  (pid %s)\n\n", commandLine(oldP), oldID, commandLine(newP), newID)
	t.printf("%-16s %14s %14s  %s\n", "", "old", "new", "change")
	for _, dc := range diffCosts {
		o, n := dc.total(&oldP.Summary), dc.total(&newP.Summary)
		t.printf("%-16s %14s %14s  %s%s\n", dc.title, amount(dc.cost, o), amount(dc.cost, n),
			change(dc.cost, int64(n)-int64(o)), growth(o, n))
	}
	for _, dc := range diffCosts {
		grew, shrank := mostChanged(changes, dc.cost, opts.top())
		if len(grew)+len(shrank) == 0 {
			continue
		}
		t.printf("\n%s by call stack\n", capitalized(dc.title))
		for _, part := range []struct {
			what string
			list []*analysis.StackChange
		}{{"grew", grew}, {"shrank", shrank}} {
			for i, sc := range part.list {
				o, n := dc.cost.Of(&sc.Old), dc.cost.Of(&sc.New)
				color := red // more memory is worse
				if part.what == "shrank" {
					color = green
				}
				t.printf("  %s #%d %s  (%s -> %s)\n", part.what, i+1, opts.paint(color, change(dc.cost, sc.Change(dc.cost))),
					amount(dc.cost, o), amount(dc.cost, n))
				t.frames(1, sc.Frames, "      ")
			}
		}
	}
	_, err := io.WriteString(w, t.b.String())
	return err
}

// mostChanged returns the n stacks whose cost c grew most, and the n
// whose cost shrank most.
func mostChanged(changes []analysis.StackChange, c analysis.Cost, n int) (grew, shrank []*analysis.StackChange) {
	for i := range changes {
		switch d := changes[i].Change(c); {
		case d > 0:
			grew = append(grew, &changes[i])
		case d < 0:
			shrank = append(shrank, &changes[i])
		}
	}
	byChange := func(sign int64) func(a, b *analysis.StackChange) int {
		return func(a, b *analysis.StackChange) int { return cmp.Compare(sign*b.Change(c), sign*a.Change(c)) }
	}
	slices.SortStableFunc(grew, byChange(1))
	slices.SortStableFunc(shrank, byChange(-1))
	return grew[:min(n, len(grew))], shrank[:min(n, len(shrank))]
}

func capitalized(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

type jsonDiff struct {
	Old    jsonDiffRun     `json:"old"`
	New    jsonDiffRun     `json:"new"`
	Totals []jsonDiffTotal `json:"totals"`
	Stacks []jsonDiffStack `json:"stacks"` // every stack whose numbers changed, the most changed peak first
}

type jsonDiffRun struct {
	PID     uint64   `json:"pid"`
	Program string   `json:"program"`
	Args    []string `json:"args"`
}

type jsonDiffTotal struct {
	Cost   string `json:"cost"`
	Old    uint64 `json:"old"`
	New    uint64 `json:"new"`
	Change int64  `json:"change"`
}

type jsonDiffStack struct {
	Stack   []jsonFrame    `json:"stack"`
	Changes []jsonDiffCost `json:"changes"` // one per cost, in the order of totals
}

type jsonDiffCost struct {
	Cost   string `json:"cost"`
	Old    uint64 `json:"old"`
	New    uint64 `json:"new"`
	Change int64  `json:"change"`
}

// DiffJSON writes memtrail diff's comparison of two runs as JSON.
func DiffJSON(w io.Writer, oldP, newP *analysis.Process, changes []analysis.StackChange) error {
	out := jsonDiff{
		Old:    jsonDiffRun{PID: oldP.PID, Program: oldP.Exe, Args: nonNil(oldP.Args)},
		New:    jsonDiffRun{PID: newP.PID, Program: newP.Exe, Args: nonNil(newP.Args)},
		Totals: []jsonDiffTotal{}, Stacks: []jsonDiffStack{},
	}
	for _, dc := range diffCosts {
		o, n := dc.total(&oldP.Summary), dc.total(&newP.Summary)
		out.Totals = append(out.Totals, jsonDiffTotal{Cost: dc.cost.String(), Old: o, New: n, Change: int64(n) - int64(o)})
	}
	var changed []*analysis.StackChange
	for i := range changes {
		if slices.ContainsFunc(diffCosts, func(dc diffCost) bool { return changes[i].Change(dc.cost) != 0 }) {
			changed = append(changed, &changes[i])
		}
	}
	abs := func(d int64) int64 { return max(d, -d) }
	slices.SortStableFunc(changed, func(a, b *analysis.StackChange) int {
		return cmp.Compare(abs(b.Change(analysis.CostPeak)), abs(a.Change(analysis.CostPeak)))
	})
	for _, sc := range changed {
		js := jsonDiffStack{Stack: jsonFrames(sc.Frames)}
		for _, dc := range diffCosts {
			js.Changes = append(js.Changes, jsonDiffCost{Cost: dc.cost.String(), Old: dc.cost.Of(&sc.Old),
				New: dc.cost.Of(&sc.New), Change: sc.Change(dc.cost)})
		}
		out.Stacks = append(out.Stacks, js)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
