package report

import (
	"fmt"
	"io"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace"
)

// JSON writes the report on one process of m as one JSON object. Its keys
// are snake_case and always present; lists are never null; times are in ns
// since the start of the process; sizes are in bytes. Stacks have all
// their frames, innermost first.
func JSON(w io.Writer, m *analysis.Model, opts Options) error {
	p, err := pick(m, opts)
	if err != nil {
		return err
	}
	r := jsonReport{
		Program:      p.Exe,
		Args:         orEmpty(p.Args),
		PID:          p.PID,
		PPID:         p.PPID,
		Forked:       p.Forked,
		Processes:    jsonProcesses(m, p),
		Summary:      jsonSummaryOf(p, opts.StackUsage),
		Peak:         jsonSites(p, analysis.ByPeak, opts.top()),
		Allocations:  jsonSites(p, analysis.ByAllocations, opts.top()),
		InUseAtExit:  jsonSites(p, analysis.ByInUseAtExit, opts.top()),
		Temporary:    jsonSites(p, analysis.ByTemporary, opts.top()),
		LostChains:   jsonLostChainsOf(p, opts.top()),
		PossiblyLost: jsonChainParts(p, p.PossiblyLost[:min(opts.top(), len(p.PossiblyLost))]),
		Problems:     jsonProblemsOf(p),
		Warnings:     orEmpty(m.AllWarnings()),
	}
	return writeJSON(w, r)
}

type jsonReport struct {
	Program     string        `json:"program"`
	Args        []string      `json:"args"`
	PID         uint64        `json:"pid"`
	PPID        uint64        `json:"ppid"`
	Forked      bool          `json:"forked"`
	Processes   []jsonProcess `json:"processes"`
	Summary     jsonSummary   `json:"summary"`
	Peak        []jsonSite    `json:"peak"`
	Allocations []jsonSite    `json:"allocations"`
	InUseAtExit []jsonSite    `json:"in_use_at_exit"`
	Temporary   []jsonSite    `json:"temporary"`
	// LostChains are the definitely lost blocks of the scan at exit,
	// by their call stack, with what hangs from them: most bytes first.
	LostChains []jsonLostChain `json:"lost_chains"`
	// PossiblyLost are the possibly lost blocks of the scan at exit, by
	// their call stack: most bytes first.
	PossiblyLost []jsonChainPart `json:"possibly_lost"`
	Problems     jsonProblems    `json:"problems"`
	Warnings     []string        `json:"warnings"`
}

// jsonProcess is a process of the trace in the list to pick from.
type jsonProcess struct {
	// ID is how -pid names the process: the pid, or the pid and the
	// image (1234.2) if the pid had several.
	ID          string   `json:"id"`
	PID         uint64   `json:"pid"`
	PPID        uint64   `json:"ppid"`
	Program     string   `json:"program"`
	Args        []string `json:"args"`
	Allocations uint64   `json:"allocations"`
	PeakBytes   uint64   `json:"peak_bytes"`
	End         jsonEnd  `json:"end"`
	Selected    bool     `json:"selected"` // the process of this report
}

type jsonEnd struct {
	How  string `json:"how"` // exited, signaled, exec, exec_unrecorded, running, unknown or not_recorded
	Code int64  `json:"code"`
	// Why the new image of exec_unrecorded was not recorded, when known:
	// statically_linked.
	Why string `json:"why,omitempty"`
}

type jsonSummary struct {
	Allocations       uint64 `json:"allocations"`
	Frees             uint64 `json:"frees"`
	BytesAllocated    uint64 `json:"bytes_allocated"`
	PeakBytes         uint64 `json:"peak_bytes"`
	PeakTimeNS        uint64 `json:"peak_time_ns"`
	InUseAtExitBytes  uint64 `json:"in_use_at_exit_bytes"`
	InUseAtExitBlocks uint64 `json:"in_use_at_exit_blocks"`
	Temporary         uint64 `json:"temporary"`
	InvalidFrees      uint64 `json:"invalid_frees"`
	// UncertainFrees are the frees that would be invalid_frees in a
	// process that did not lose events (see analysis.Summary).
	UncertainFrees uint64 `json:"uncertain_frees"`
	// The most stack in use at once, all threads together, sampled at
	// heap events; and the most heap and stack together.
	StackPeakBytes  uint64 `json:"stack_peak_bytes"`
	StackPeakTimeNS uint64 `json:"stack_peak_time_ns"`
	PeakTotalBytes  uint64 `json:"peak_total_bytes"`
	PeakTotalTimeNS uint64 `json:"peak_total_time_ns"`
	// The function entries and returns measured (a program built with
	// -finstrument-functions, recorded with -stack-calls): with them the
	// stack peaks are exact.
	StackCalls   uint64       `json:"stack_calls"`
	DeepestStack *jsonDeepest `json:"deepest_stack,omitempty"`
	// The blocks still allocated at exit by memcheck's classes, from the
	// scan at the process's normal exit (memtrail run, unless -leak-check=false); null,
	// with leak_scan saying why, when there is none.
	DefinitelyLostBytes  *uint64 `json:"definitely_lost_bytes"`
	DefinitelyLostBlocks *uint64 `json:"definitely_lost_blocks"`
	IndirectlyLostBytes  *uint64 `json:"indirectly_lost_bytes"`
	IndirectlyLostBlocks *uint64 `json:"indirectly_lost_blocks"`
	PossiblyLostBytes    *uint64 `json:"possibly_lost_bytes"`
	PossiblyLostBlocks   *uint64 `json:"possibly_lost_blocks"`
	StillReachableBytes  *uint64 `json:"still_reachable_bytes"`
	StillReachableBlocks *uint64 `json:"still_reachable_blocks"`
	LeakScan             string  `json:"leak_scan"`    // "done", or why there is no scan
	LeakScanNS           *uint64 `json:"leak_scan_ns"` // how long the scan held the process at its exit
	RunTimeNS            uint64  `json:"run_time_ns"`
	End                  jsonEnd `json:"end"`
	LostEvents           uint64  `json:"lost_events"`
}

type jsonSite struct {
	StackID           uint64      `json:"stack_id"`
	Allocations       uint64      `json:"allocations"`
	BytesAllocated    uint64      `json:"bytes_allocated"`
	Frees             uint64      `json:"frees"`
	PeakBytes         uint64      `json:"peak_bytes"`
	PeakBlocks        uint64      `json:"peak_blocks"`
	InUseAtExitBytes  uint64      `json:"in_use_at_exit_bytes"`
	InUseAtExitBlocks uint64      `json:"in_use_at_exit_blocks"`
	Temporary         uint64      `json:"temporary"`
	Inherited         bool        `json:"inherited,omitempty"` // the parent's, before the fork
	Stack             []jsonFrame `json:"stack"`
}

type jsonFrame struct {
	Function string `json:"function"` // "" if unknown
	// Name is what the text report calls a frame of no known function
	// (its object and offset: "libsqlite3.so.0+0xa7504"); only for those.
	Name    string `json:"name,omitempty"`
	File    string `json:"file"` // "" if unknown
	Line    uint64 `json:"line"` // 0 if unknown
	Object  string `json:"object"`
	Address string `json:"address"` // return address relative to the object's load base, in hex
	Inlined bool   `json:"inlined"`
	// BelowMain marks the frames outside main, the C runtime's start-up,
	// which the tables and trees leave out (analysis.OutermostMain).
	BelowMain bool `json:"below_main,omitempty"`
}

type jsonProblems struct {
	InvalidFrees    []jsonProblem `json:"invalid_frees"`
	DoubleFrees     []jsonProblem `json:"double_frees"`
	MismatchedFrees []jsonProblem `json:"mismatched_frees"`
	InvalidReallocs []jsonProblem `json:"invalid_reallocs"`
}

type jsonProblem struct {
	Count       uint64 `json:"count"`
	Size        uint64 `json:"size"`
	FirstTimeNS uint64 `json:"first_time_ns"`
	AllocAPI    string `json:"alloc_api"`
	FreeAPI     string `json:"free_api"`
	// The stacks are empty when unknown or, for the first free, when the
	// problem is not about a block freed before.
	AllocStack     []jsonFrame `json:"alloc_stack"`
	FreeStack      []jsonFrame `json:"free_stack"`
	FirstFreeStack []jsonFrame `json:"first_free_stack"`
}

func jsonProcesses(m *analysis.Model, selected *analysis.Process) []jsonProcess {
	list := make([]jsonProcess, 0, len(m.Processes))
	x := imagesOf(m)
	for _, p := range m.Processes {
		list = append(list, jsonProcess{
			ID: x.id(p).String(), PID: p.PID, PPID: p.PPID, Program: p.Exe, Args: orEmpty(p.Args),
			Allocations: p.Summary.Allocations, PeakBytes: p.Summary.PeakBytes,
			End: jsonEndOf(p), Selected: p == selected,
		})
	}
	return list
}

func jsonEndOf(p *analysis.Process) jsonEnd {
	end := jsonEnd{How: endName(p), Code: p.Code}
	if p.Ended && p.How == trace.EndExecUnrecorded && p.Code == trace.UnrecordedStatic {
		end.Why = "statically_linked"
	}
	return end
}

func jsonSummaryOf(p *analysis.Process, usage StackUsage) jsonSummary {
	s := p.Summary
	js := jsonSummary{
		Allocations: s.Allocations, Frees: s.Frees, BytesAllocated: s.BytesAllocated,
		PeakBytes: s.PeakBytes, InUseAtExitBytes: s.InUseAtExitBytes, InUseAtExitBlocks: s.InUseAtExitBlocks,
		Temporary: s.Temporary, InvalidFrees: s.InvalidFrees, UncertainFrees: s.UncertainFrees,
		StackPeakBytes: s.StackPeakBytes, PeakTotalBytes: s.PeakTotalBytes,
		StackCalls: s.StackCalls, DeepestStack: jsonDeepestOf(p, usage),
		RunTimeNS: p.RunTime(), End: jsonEndOf(p), LostEvents: p.Lost,
	}
	if s.PeakBytes > 0 {
		js.PeakTimeNS = sinceStart(p, s.PeakTime)
	}
	if s.StackPeakBytes > 0 {
		js.StackPeakTimeNS = sinceStart(p, s.StackPeakTime)
	}
	if s.PeakTotalBytes > 0 {
		js.PeakTotalTimeNS = sinceStart(p, s.PeakTotalTime)
	}
	scan, why := p.LeakClasses()
	js.LeakScan = why
	if scan != nil {
		js.LeakScan = "done"
		js.LeakScanNS = &scan.Duration
		for _, f := range []struct {
			dst **uint64
			v   uint64
		}{
			{&js.DefinitelyLostBytes, scan.DefinitelyLostBytes}, {&js.DefinitelyLostBlocks, scan.DefinitelyLostBlocks},
			{&js.IndirectlyLostBytes, scan.IndirectlyLostBytes}, {&js.IndirectlyLostBlocks, scan.IndirectlyLostBlocks},
			{&js.PossiblyLostBytes, scan.PossiblyLostBytes}, {&js.PossiblyLostBlocks, scan.PossiblyLostBlocks},
			{&js.StillReachableBytes, scan.StillReachableBytes}, {&js.StillReachableBlocks, scan.StillReachableBlocks},
		} {
			*f.dst = &f.v
		}
	}
	return js
}

func jsonSites(p *analysis.Process, order analysis.SiteOrder, n int) []jsonSite {
	return jsonSitesOf(p, p.TopSites(order, n))
}

// jsonSitesOf lists sites of p with their stacks.
func jsonSitesOf(p *analysis.Process, sites []*analysis.Site) []jsonSite {
	list := make([]jsonSite, 0, len(sites))
	for _, s := range sites {
		list = append(list, jsonSite{
			StackID: s.Stack, Allocations: s.Allocations, BytesAllocated: s.BytesAllocated, Frees: s.Frees,
			PeakBytes: s.PeakBytes, PeakBlocks: s.PeakBlocks,
			InUseAtExitBytes: s.InUseAtExitBytes, InUseAtExitBlocks: s.InUseAtExitBlocks,
			Temporary: s.Temporary, Inherited: s.Inherited, Stack: jsonFrames(p.SiteStack(s)),
		})
	}
	return list
}

func jsonStack(p *analysis.Process, id uint64) []jsonFrame { return jsonFrames(p.Stack(id)) }

// hex writes an address as JSON has it.
func hex(addr uint64) string { return fmt.Sprintf("0x%x", addr) }

func jsonFrames(frames []analysis.Frame) []jsonFrame {
	list := make([]jsonFrame, 0, len(frames))
	main := analysis.OutermostMain(frames)
	for i, f := range frames {
		jf := jsonFrame{
			Function: f.Function, File: f.File, Line: f.Line, Object: f.Object,
			Address: hex(f.Address), Inlined: f.Inlined, BelowMain: main >= 0 && i > main,
		}
		if f.Function == "" {
			jf.Name = f.Name()
		}
		list = append(list, jf)
	}
	return list
}

// jsonProblemsOf lists all the problems of p: there is one per distinct
// set of stacks, so they are as bounded as the stacks.
func jsonProblemsOf(p *analysis.Process) jsonProblems {
	jp := jsonProblems{
		InvalidFrees: []jsonProblem{}, DoubleFrees: []jsonProblem{},
		MismatchedFrees: []jsonProblem{}, InvalidReallocs: []jsonProblem{},
	}
	lists := map[analysis.ProblemKind]*[]jsonProblem{
		analysis.InvalidFree: &jp.InvalidFrees, analysis.DoubleFree: &jp.DoubleFrees,
		analysis.MismatchedFree: &jp.MismatchedFrees, analysis.InvalidRealloc: &jp.InvalidReallocs,
	}
	for _, pr := range p.Problems {
		list, ok := lists[pr.Kind]
		if !ok {
			continue
		}
		*list = append(*list, jsonProblem{
			Count: pr.Count, Size: pr.Size, FirstTimeNS: sinceStart(p, pr.FirstTime),
			AllocAPI: pr.AllocAPI.String(), FreeAPI: pr.FreeAPI.String(),
			AllocStack: jsonStack(p, pr.AllocStack), FreeStack: jsonStack(p, pr.FreeStack),
			FirstFreeStack: jsonStack(p, pr.FirstFreeStack),
		})
	}
	return jp
}

// orEmpty makes a nil list an empty one, which JSON writes as [] rather
// than null.
func orEmpty[T any](list []T) []T {
	if list == nil {
		return []T{}
	}
	return list
}

type jsonLostChain struct {
	Leads   uint64          `json:"leads"` // definitely lost blocks from stack
	Bytes   uint64          `json:"bytes"` // of the leads and of all that hangs from them
	Blocks  uint64          `json:"blocks"`
	Stack   []jsonFrame     `json:"stack"`
	Hanging []jsonChainPart `json:"hanging"` // the indirectly lost blocks, by stack
	// Origins are where the leaks were made: the frees of the blocks that
	// pointed to the leads, by the free's stack, with what each made
	// unreachable; null unless recorded with memtrail run -leak-origins.
	Origins []jsonChainPart `json:"origins"`
}

type jsonChainPart struct {
	Bytes  uint64      `json:"bytes"`
	Blocks uint64      `json:"blocks"`
	Stack  []jsonFrame `json:"stack"`
}

func jsonChainParts(p *analysis.Process, parts []analysis.ChainPart) []jsonChainPart {
	list := []jsonChainPart{}
	for _, h := range parts {
		list = append(list, jsonChainPart{Bytes: h.Bytes, Blocks: h.Blocks, Stack: jsonStack(p, h.Stack)})
	}
	return list
}

// jsonLostChainsOf lists the top lost chains of p.
func jsonLostChainsOf(p *analysis.Process, n int) []jsonLostChain {
	list := []jsonLostChain{}
	for _, c := range p.LostChains[:min(n, len(p.LostChains))] {
		jc := jsonLostChain{Leads: c.Leads, Bytes: c.Bytes, Blocks: c.Blocks, Stack: jsonStack(p, c.Stack)}
		jc.Hanging = jsonChainParts(p, c.Hanging)
		if p.OriginsLooked {
			jc.Origins = jsonChainParts(p, c.Origins)
		}
		list = append(list, jc)
	}
	return list
}
