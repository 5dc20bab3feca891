package report

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/check"
)

// CheckText writes the verdicts of memtrail check: for each process, each
// budget held or broken, with the call stacks that weigh most in a broken
// one, and what the suppressions took out.
func CheckText(w io.Writer, m *analysis.Model, verdicts []check.Verdict, opts Options) error {
	t := &textReport{m: m, opts: opts}
	t.warnings()
	broken, budgets := 0, 0
	for _, v := range verdicts {
		for _, r := range v.Results {
			budgets++
			if r.Broken {
				broken++
			}
		}
	}
	switch {
	case broken == 0 && budgets == 1:
		t.printf("memtrail check: the budget held\n")
	case broken == 0:
		t.printf("memtrail check: all %d budgets held\n", budgets)
	default:
		t.printf("memtrail check: %d of %s broken\n", broken, Plural(uint64(budgets), "budget"))
	}
	x := imagesOf(m)
	// Every broken budget is shown; of the processes that held all
	// theirs, the first few, so that a trace of hundreds of processes
	// keeps its verdict short.
	held, unshown := 0, 0
	for _, v := range verdicts {
		if !v.Broken() {
			if held++; held > listed {
				unshown++
				continue
			}
		}
		t.p = v.Process
		own := ""
		if v.Process.InheritedLeftOut {
			own = "; forked: its own allocations only"
		}
		t.printf("\n%s  (pid %s, %s%s)\n", commandLine(v.Process), x.id(v.Process), Ending(v.Process.How, v.Process.Code), own)
		for _, r := range v.Results {
			t.checkResult(r, v)
		}
		if len(v.Used) > 0 {
			t.printf("  suppressed: %s in %s\n", Size(v.Suppressed.Bytes), Plural(v.Suppressed.Blocks, "block"))
			for _, u := range v.Used {
				t.printf("    %s in %s  %s  (%s)\n", Size(u.Bytes), Plural(u.Blocks, "block"), Printable(u.Suppression.Name), Printable(u.Suppression.Source))
			}
		}
	}
	if unshown > 0 {
		t.printf("\n... and %s that held every budget (memtrail check -json lists every verdict)\n", Plural(uint64(unshown), "more process"))
	}
	_, err := io.WriteString(w, t.b.String())
	return err
}

func (t *textReport) checkResult(r check.Result, v check.Verdict) {
	amount := func(n uint64) string {
		switch {
		case !r.Kind.IsBytes():
			return Count(n)
		case Size(r.Actual) == Size(r.Limit) && r.Actual != r.Limit:
			// Rounded, the two would read the same: "1.04 MiB >
			// 1.04 MiB".
			return exactSize(n)
		}
		return Size(n)
	}
	status, cmp := t.opts.paint(green, "ok  "), "<="
	if r.Broken {
		status, cmp = t.opts.paint(red, "FAIL"), ">"
	}
	t.printf("  %s %-15s %s %s %s (-%s)\n", status, r.Kind, amount(r.Actual), cmp, amount(r.Limit), r.Kind.Flag())
	if !r.Broken {
		return
	}
	p := t.p
	switch r.Kind {
	case check.Peak:
		t.printf("       reached %s; the call stacks that held most of it then:\n", afterStart(t.m, p, p.Summary.PeakTime))
	case check.InUseAtExit:
		t.printf("       the call stacks whose blocks were still allocated at exit:\n")
	case check.Allocations:
		t.printf("       the call stacks that allocated most often:\n")
	case check.DefinitelyLost, check.IndirectlyLost, check.PossiblyLost:
		t.printf("       the call stacks that allocated those blocks:\n")
	}
	for i, s := range r.Sites {
		var what string
		switch r.Kind {
		case check.Peak:
			what = fmt.Sprintf("%s in %s", Size(s.PeakBytes), Plural(s.PeakBlocks, "block"))
		case check.InUseAtExit:
			what = fmt.Sprintf("%s in %s", Size(s.InUseAtExitBytes), Plural(s.InUseAtExitBlocks, "block"))
		case check.Allocations:
			what = fmt.Sprintf("%s, %s", Plural(s.Allocations, "allocation"), Size(s.BytesAllocated))
		default:
			what = Size(r.Amounts[i])
		}
		t.printf("       #%d %s\n", i+1, what)
		t.frames(s.Stack, p.SiteStack(s), "          ")
	}
}

type jsonCheck struct {
	Broken    bool               `json:"broken"`
	Processes []jsonCheckProcess `json:"processes"`
	Warnings  []string           `json:"warnings"`
}

type jsonCheckProcess struct {
	ID  string `json:"id"` // as -pid names it (see jsonProcess)
	PID uint64 `json:"pid"`
	// InheritedLeftOut says that the budgets held the fork child to its
	// own allocations, not to the heap it inherited.
	InheritedLeftOut bool              `json:"inherited_left_out"`
	Program          string            `json:"program"`
	Budgets          []jsonCheckBudget `json:"budgets"`
	Suppressed       jsonSuppressed    `json:"suppressed"`
}

type jsonCheckBudget struct {
	Budget string     `json:"budget"` // the flag's name: max-peak, ...
	Limit  uint64     `json:"limit"`
	Actual uint64     `json:"actual"`
	Broken bool       `json:"broken"`
	Sites  []jsonSite `json:"sites"` // the call stacks that weigh most in actual
}

type jsonSuppressed struct {
	Bytes  uint64         `json:"bytes"`
	Blocks uint64         `json:"blocks"`
	By     []jsonSuppress `json:"by"`
}

type jsonSuppress struct {
	Suppression string `json:"suppression"`
	Source      string `json:"source"`
	Bytes       uint64 `json:"bytes"`
	Blocks      uint64 `json:"blocks"`
}

// CheckJSON writes the verdicts of memtrail check as JSON.
func CheckJSON(w io.Writer, m *analysis.Model, verdicts []check.Verdict) error {
	out := jsonCheck{Processes: []jsonCheckProcess{}, Warnings: m.AllWarnings()}
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	x := imagesOf(m)
	for _, v := range verdicts {
		jp := jsonCheckProcess{ID: x.id(v.Process).String(), PID: v.Process.PID, InheritedLeftOut: v.Process.InheritedLeftOut, Program: v.Process.Exe, Budgets: []jsonCheckBudget{},
			Suppressed: jsonSuppressed{Bytes: v.Suppressed.Bytes, Blocks: v.Suppressed.Blocks, By: []jsonSuppress{}}}
		for _, r := range v.Results {
			out.Broken = out.Broken || r.Broken
			jp.Budgets = append(jp.Budgets, jsonCheckBudget{Budget: r.Kind.Flag(), Limit: r.Limit, Actual: r.Actual,
				Broken: r.Broken, Sites: jsonSitesOf(v.Process, r.Sites)})
		}
		for _, u := range v.Used {
			jp.Suppressed.By = append(jp.Suppressed.By, jsonSuppress{Suppression: u.Suppression.Name,
				Source: u.Suppression.Source, Bytes: u.Bytes, Blocks: u.Blocks})
		}
		out.Processes = append(out.Processes, jp)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
