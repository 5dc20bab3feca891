package report

import (
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace"
)

// Text writes the report on one process of m as text.
func Text(w io.Writer, m *analysis.Model, opts Options) error {
	p, err := pick(m, opts)
	if err != nil {
		return err
	}
	t := &textReport{m: m, p: p, opts: opts}
	t.warnings()
	t.header()
	t.window()
	t.summary()
	t.deepest()
	for _, tab := range siteTables {
		t.siteTable(tab)
	}
	t.lostChains()
	t.possiblyLost()
	t.problems()
	t.symbols()
	t.otherProcesses()
	_, err = io.WriteString(w, t.b.String())
	return err
}

// textReport is a text report being written.
type textReport struct {
	m    *analysis.Model
	p    *analysis.Process
	opts Options
	b    strings.Builder
}

func (t *textReport) printf(format string, args ...any) {
	fmt.Fprintf(&t.b, format, args...)
}

func (t *textReport) warnings() {
	warnings := t.m.AllWarnings()
	for _, w := range warnings {
		t.printf("warning: %s\n", Printable(w))
	}
	if len(warnings) > 0 {
		t.printf("\n")
	}
}

func (t *textReport) header() {
	p := t.p
	t.printf("%s", commandLine(p))
	if len(p.Args) > 0 && p.Exe != "" && p.Args[0] != p.Exe {
		t.printf("  (%s)", Printable(p.Exe))
	}
	t.printf("\npid %d%s", p.PID, imageNote(t.m, p))
	if p.Forked {
		t.printf(", forked from pid %d", p.PPID)
	}
	t.printf(", %s after %s\n", ending(p), Duration(p.RunTime()))
}

func (t *textReport) summary() {
	p, s := t.p, t.p.Summary
	rows := [][2]string{
		{"allocations", Count(s.Allocations)},
		{"frees", Count(s.Frees)},
		{"bytes allocated", exactSize(s.BytesAllocated)},
		{"peak heap", exactSize(s.PeakBytes)},
		{"in use " + t.endLabel(), exactSize(s.InUseAtExitBytes) + " in " + Plural(s.InUseAtExitBlocks, "block")},
		{"temporary", Plural(s.Temporary, "allocation") + " freed before any other allocation"},
	}
	if s.PeakBytes > 0 {
		rows[3][1] += ", " + afterStart(t.m, p, s.PeakTime)
	}
	if s.StackPeakBytes > 0 {
		// Traces of memtrail before version 2 of the format have no
		// stacks: nothing to say of them.
		rows = slices.Insert(rows, 4,
			[2]string{"peak stack", exactSize(s.StackPeakBytes) + ", " + afterStart(t.m, p, s.StackPeakTime) + deepestThread(p)},
			[2]string{"peak heap+stack", exactSize(s.PeakTotalBytes) + ", " + afterStart(t.m, p, s.PeakTotalTime)})
	}
	// What is in use at exit, by memcheck's classes, when the process
	// was scanned at its exit; why not, when it was recorded to be or
	// did not call exit (a process that exited with no scan was recorded
	// with -leak-check=false, which its user knows).
	inUse := slices.IndexFunc(rows, func(r [2]string) bool { return strings.HasPrefix(r[0], "in use") }) + 1
	switch scan, why := p.LeakClasses(); {
	case scan != nil:
		for i, c := range []struct {
			name          string
			bytes, blocks uint64
		}{
			{"definitely lost", scan.DefinitelyLostBytes, scan.DefinitelyLostBlocks},
			{"indirectly lost", scan.IndirectlyLostBytes, scan.IndirectlyLostBlocks},
			{"possibly lost", scan.PossiblyLostBytes, scan.PossiblyLostBlocks},
			{"still reachable", scan.StillReachableBytes, scan.StillReachableBlocks},
		} {
			rows = slices.Insert(rows, inUse+i, [2]string{"  " + c.name, exactSize(c.bytes) + " in " + Plural(c.blocks, "block")})
		}
		rows = slices.Insert(rows, inUse+4, [2]string{"  scanned in", Duration(scan.Duration) + " (the program held at its exit)"})
	case p.LeakScan != nil || p.Ended && p.How != trace.EndExited:
		rows = slices.Insert(rows, inUse, [2]string{"  leak classes", why})
	}
	if s.InvalidFrees > 0 {
		rows = append(rows, [2]string{"invalid frees", Count(s.InvalidFrees) + " (see Problems)"})
	}
	if s.UncertainFrees > 0 {
		why := "lost events may explain them"
		switch {
		case p.PatchedAllocator() && p.Lost == 0:
			why = "the program's own allocator, patched after it began, may explain them: see the warnings"
		case p.PatchedAllocator():
			why = "lost events, and the program's own allocator, patched after it began, may explain them: see the warnings"
		}
		rows = append(rows, [2]string{"uncertain frees", Count(s.UncertainFrees) + " (frees of addresses not in use, not called invalid: " + why + ")"})
	}
	if p.Lost > 0 {
		lost := Count(p.Lost)
		if len(p.LostReasons) > 0 {
			lost += " (" + strings.Join(p.LostReasons, "; ") + ")"
		}
		rows = append(rows, [2]string{"lost events", lost})
	}
	t.printf("\nSummary\n")
	width := 0
	for _, r := range rows {
		width = max(width, len(r[0]))
	}
	for _, r := range rows {
		t.printf("  %-*s %s\n", max(width, 17), r[0], r[1])
	}
}

// deepestThread says, after the peak stack of p (its threads together at
// heap events), which thread went deepest and how deep, its high-water
// mark included.
func deepestThread(p *analysis.Process) string {
	var deepest *analysis.ThreadSummary
	for i := range p.Threads {
		if th := &p.Threads[i]; deepest == nil || th.StackPeakBytes > deepest.StackPeakBytes {
			deepest = th
		}
	}
	if deepest == nil || deepest.StackPeakBytes == 0 {
		return ""
	}
	at := "at heap events"
	if p.Summary.StackCalls > 0 {
		at = "at function entries and heap events"
	}
	return fmt.Sprintf(" (%s); deepest thread %d: %s", at, deepest.Index, Size(deepest.StackPeakBytes))
}

// siteTable is one of the tables of call stacks.
type siteTable struct {
	title string
	order analysis.SiteOrder
	// headline says what a site counts in the table.
	headline func(s *analysis.Site, sum analysis.Summary) string
}

var siteTables = []siteTable{
	{"Peak memory by call stack", analysis.ByPeak, func(s *analysis.Site, sum analysis.Summary) string {
		return fmt.Sprintf("%s in %s at the peak, %s of it",
			Size(s.PeakBytes), Plural(s.PeakBlocks, "block"), percent(s.PeakBytes, sum.PeakBytes))
	}},
	{"Most allocations", analysis.ByAllocations, func(s *analysis.Site, sum analysis.Summary) string {
		return fmt.Sprintf("%s, %s of all, %s in all",
			Plural(s.Allocations, "allocation"), percent(s.Allocations, sum.Allocations), Size(s.BytesAllocated))
	}},
	{"Still in use at exit", analysis.ByInUseAtExit, func(s *analysis.Site, sum analysis.Summary) string {
		return fmt.Sprintf("%s in %s, %s of what is in use at exit",
			Size(s.InUseAtExitBytes), Plural(s.InUseAtExitBlocks, "block"),
			percent(s.InUseAtExitBytes, sum.InUseAtExitBytes))
	}},
	{"Temporary allocations", analysis.ByTemporary, func(s *analysis.Site, sum analysis.Summary) string {
		return fmt.Sprintf("%s of %s temporary, %s",
			Count(s.Temporary), Plural(s.Allocations, "allocation"), percent(s.Temporary, s.Allocations))
	}},
}

func (t *textReport) siteTable(tab siteTable) {
	all := t.p.TopSites(tab.order, 0)
	t.printf("\n%s", tab.title)
	t.printf("%s\n", t.limitNote(len(all), "call stacks"))
	if len(all) == 0 {
		t.printf("  none\n")
	}
	for i, s := range all[:min(len(all), t.opts.top())] {
		if i > 0 {
			t.printf("\n")
		}
		t.printf("  #%-3d%s\n", i+1, tab.headline(s, t.p.Summary))
		if s.Inherited {
			t.printf("      (allocated by the parent before the fork)\n")
		}
		t.frames(s.Stack, t.p.SiteStack(s), "      ")
	}
}

// lostChains writes the definitely lost blocks by call stack, each with
// what hangs from it: one free of each of them would have released it all.
func (t *textReport) lostChains() {
	chains := t.p.LostChains
	if len(chains) == 0 {
		return
	}
	t.printf("\nDefinitely lost, with what hangs from it")
	t.printf("%s\n", t.limitNote(len(chains), "call stacks"))
	for i, c := range chains[:min(len(chains), t.opts.top())] {
		if i > 0 {
			t.printf("\n")
		}
		t.printf("  #%-3d%s in %s: a free of %s from here would have released %s\n", i+1, Size(c.Bytes),
			Plural(c.Blocks, "block"), map[bool]string{true: "the block", false: "each of the " + Count(c.Leads) + " blocks"}[c.Leads == 1],
			map[bool]string{true: "it", false: "them"}[c.Blocks == 1])
		t.stack(c.Stack, "      ")
		for _, h := range c.Hanging {
			t.printf("      hanging from it: %s in %s, from\n", Size(h.Bytes), Plural(h.Blocks, "block"))
			t.stack(h.Stack, "          ")
		}
		t.origins(c)
	}
}

// possiblyLost writes the possibly lost blocks by call stack: kept only
// through pointers into their interiors.
func (t *textReport) possiblyLost() {
	parts := t.p.PossiblyLost
	if len(parts) == 0 {
		return
	}
	t.printf("\nPossibly lost (only pointers into their interiors lead to them)")
	t.printf("%s\n", t.limitNote(len(parts), "call stacks"))
	for i, h := range parts[:min(len(parts), t.opts.top())] {
		t.printf("  #%-3d%s in %s, from\n", i+1, Size(h.Bytes), Plural(h.Blocks, "block"))
		t.stack(h.Stack, "      ")
	}
}

// origins writes where the leaks of chain c were made, when the trace
// looked for it (memtrail run -leak-origins).
func (t *textReport) origins(c analysis.LostChain) {
	if !t.p.OriginsLooked {
		return
	}
	var bytes, blocks uint64
	for _, o := range c.Origins {
		t.printf("      made unreachable by a free of the block that pointed to it: %s in %s, freed from\n",
			Size(o.Bytes), Plural(o.Blocks, "block"))
		t.stack(o.Stack, "          ")
		bytes, blocks = bytes+o.Bytes, blocks+o.Blocks
	}
	if blocks < c.Blocks {
		t.printf("      %s in %s lost their last pointer other than by a free (overwritten, or out of scope)\n",
			Size(c.Bytes-bytes), Plural(c.Blocks-blocks, "block"))
	}
}

// stack writes the innermost frames of stack id, a line each.
func (t *textReport) stack(id uint64, indent string) {
	t.frames(id, t.p.Stack(id), indent)
}

func (t *textReport) frames(id uint64, frames []analysis.Frame, indent string) {
	if id == 0 {
		t.printf("%s(no call stack recorded)\n", indent)
		return
	}
	shown := min(len(frames), t.opts.frames())
	for _, f := range frames[:shown] {
		t.printf("%s%s\n", indent, t.frameLine(f))
	}
	if more := len(frames) - shown; more > 0 {
		t.printf("%s... %d more %s\n", indent, more, map[bool]string{true: "frame", false: "frames"}[more == 1])
	}
}

// frameLine writes a frame as "function (file:line)". Files under the
// directory the process started in are shown relative to it.
func (t *textReport) frameLine(f analysis.Frame) string {
	s := Printable(f.Name())
	file := Printable(f.File)
	if cwd := t.p.Cwd; cwd != "" {
		file = strings.TrimPrefix(file, strings.TrimSuffix(cwd, "/")+"/")
	}
	switch {
	case file != "" && f.Line != 0:
		s += fmt.Sprintf(" (%s:%d)", file, f.Line)
	case file != "":
		s += " (" + file + ")"
	case f.Function != "" && f.Object != "":
		s += " (in " + Printable(path.Base(f.Object)) + ")"
	}
	if f.Inlined {
		s += " [inlined]"
	}
	return s
}

func (t *textReport) problems() {
	t.printf("\nProblems\n")
	if len(t.p.Problems) == 0 {
		if t.p.Summary.UncertainFrees > 0 {
			t.printf("  none certain (see uncertain frees above)\n")
		} else {
			t.printf("  none\n")
		}
		return
	}
	first := true
	for kind := analysis.InvalidFree; kind <= analysis.InvalidRealloc; kind++ {
		var ofKind []analysis.Problem
		for _, pr := range t.p.Problems {
			if pr.Kind == kind {
				ofKind = append(ofKind, pr)
			}
		}
		for i, pr := range ofKind {
			if !first {
				t.printf("\n")
			}
			first = false
			if i == t.opts.top() {
				t.printf("  ... and %s from other call stacks\n", Plural(uint64(len(ofKind)-i), kind.String()))
				break
			}
			t.problem(pr)
		}
	}
}

func (t *textReport) problem(pr analysis.Problem) {
	t.printf("  %s: %s, %s\n", pr.Kind, problemText(pr), times(pr.Count))
	for _, st := range problemStacks(pr) {
		t.printf("    %s:\n", st.label)
		t.stack(st.id, "      ")
	}
}

// problemText says what went wrong.
func problemText(pr analysis.Problem) string {
	switch pr.Kind {
	case analysis.InvalidFree:
		return fmt.Sprintf("%s of an address that is not a block in use", apiName(pr.FreeAPI))
	case analysis.DoubleFree:
		return fmt.Sprintf("%s of %s already freed", apiName(pr.FreeAPI), blockText(pr))
	case analysis.MismatchedFree:
		return fmt.Sprintf("%s from %s released with %s", blockText(pr), pr.AllocAPI, pr.FreeAPI)
	case analysis.InvalidRealloc:
		if pr.FirstFreeStack != 0 || pr.AllocAPI != trace.APIUnknown {
			return fmt.Sprintf("%s of %s already freed", apiName(pr.FreeAPI), blockText(pr))
		}
		return fmt.Sprintf("%s of an address that is not a block in use", apiName(pr.FreeAPI))
	}
	return ""
}

func blockText(pr analysis.Problem) string {
	if pr.AllocAPI == trace.APIUnknown {
		return "a block"
	}
	return "a block of " + Size(pr.Size)
}

func apiName(a trace.API) string {
	if a == trace.APIUnknown {
		return "a release"
	}
	return a.String()
}

type labeledStack struct {
	label string
	id    uint64
}

// problemStacks returns the stacks that tell the story of a problem, the
// wrong call first.
func problemStacks(pr analysis.Problem) []labeledStack {
	var sts []labeledStack
	switch pr.Kind {
	case analysis.InvalidFree:
		sts = append(sts, labeledStack{"freed at", pr.FreeStack})
	case analysis.DoubleFree:
		sts = append(sts, labeledStack{"freed again at", pr.FreeStack}, labeledStack{"first freed at", pr.FirstFreeStack})
	case analysis.MismatchedFree:
		sts = append(sts, labeledStack{"released at", pr.FreeStack})
	case analysis.InvalidRealloc:
		sts = append(sts, labeledStack{"reallocated at", pr.FreeStack})
		if pr.FirstFreeStack != 0 {
			sts = append(sts, labeledStack{"freed at", pr.FirstFreeStack})
		}
	}
	if pr.AllocStack != 0 || pr.AllocAPI != trace.APIUnknown {
		sts = append(sts, labeledStack{"allocated at", pr.AllocStack})
	}
	return sts
}

// symbols notes the objects the stacks run through that could not be
// symbolized fully: their frames lack names or lines.
func (t *textReport) symbols() {
	var poor []*analysis.Object
	for _, o := range t.p.Objects() {
		if o.HasStatus && o.Status != trace.SymbolsFull {
			poor = append(poor, o)
		}
	}
	if len(poor) == 0 {
		return
	}
	t.printf("\nObjects without full symbols: their frames lack names or lines\n")
	for _, o := range poor {
		// The symbolizer's message says what the status is, and why.
		why := o.StatusMessage
		if why == "" {
			why = o.Status.String()
		}
		t.printf("  %s: %s\n", Printable(o.Path), Printable(why))
	}
}

// table writes rows in aligned columns, the numeric ones aligned right.
func (t *textReport) table(rows [][]string, right []bool) { t.tableIndented(rows, right, "") }

// tableIndented writes a table further to the right by indent.
func (t *textReport) tableIndented(rows [][]string, right []bool, indent string) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, cell := range r {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	for _, r := range rows {
		var line strings.Builder
		line.WriteString(" ")
		for i, cell := range r {
			pad := strings.Repeat(" ", widths[i]-len([]rune(cell)))
			line.WriteString(" ")
			if right[i] {
				line.WriteString(pad + cell)
			} else {
				line.WriteString(cell + pad)
			}
			line.WriteString(" ")
		}
		t.printf("%s%s\n", indent, strings.TrimRight(line.String(), " "))
	}
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
