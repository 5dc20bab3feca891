package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/memtrail/memtrail/internal/stackdepth"
)

// StackOptions say what a report of memtrail stack shows.
type StackOptions struct {
	// Entries are the functions whose worst case and deepest chain are
	// shown: main, the one -entry names, or every root.
	Entries []*stackdepth.Function
	// Top is how many functions the table of the largest frames lists
	// (and the JSON's functions; 0 there means all).
	Top int
	// Measured, if not nil, is the comparison with a recording.
	Measured *stackdepth.Comparison
}

// WriteStackText writes the report of memtrail stack (the worst case of
// the stack of a binary's functions) for people.
func WriteStackText(w io.Writer, a *stackdepth.Analysis, opts StackOptions) error {
	bw := &strings.Builder{}
	fmt.Fprintf(bw, "%s: %d functions; frames from %s\n", Printable(a.Path), countFunctions(a), sourceSummary(a))
	for _, entry := range opts.Entries {
		writeEntry(bw, a, entry)
	}
	if opts.Top > 0 {
		writeLargest(bw, a, opts.Top)
	}
	if opts.Measured != nil {
		writeStackMeasured(bw, opts.Measured)
	}
	for _, n := range a.Notes {
		fmt.Fprintf(bw, "note: %s\n", Printable(n))
	}
	_, err := io.WriteString(w, bw.String())
	return err
}

// countFunctions counts the functions, fragments left out.
func countFunctions(a *stackdepth.Analysis) int {
	n := 0
	for _, fn := range a.Functions {
		if !fn.IsFragment() {
			n++
		}
	}
	return n
}

// sourceSummary says how many frames came from where.
func sourceSummary(a *stackdepth.Analysis) string {
	counts := map[stackdepth.Source]int{}
	for _, fn := range a.Functions {
		if !fn.IsFragment() && fn.Source != "" {
			counts[fn.Source]++
		}
	}
	var parts []string
	for _, s := range []struct {
		src  stackdepth.Source
		what string
	}{
		{stackdepth.FromCFI, ".eh_frame"},
		{stackdepth.FromCFIAndCode, ".eh_frame and code (frame pointer)"},
		{stackdepth.FromCode, "code (no CFI)"},
		{stackdepth.FromStackUsage, "-fstack-usage"},
	} {
		if counts[s.src] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s.what, counts[s.src]))
		}
	}
	return strings.Join(parts, ", ")
}

// writeEntry writes an entry's worst case, deepest chain and what the
// bound leaves out.
func writeEntry(w io.Writer, a *stackdepth.Analysis, entry *stackdepth.Function) {
	fmt.Fprintf(w, "\nWorst case from %s: %s", Printable(entry.Demangled), stackVerdict(entry))
	chain := a.Chain(entry)
	fmt.Fprintf(w, "\nDeepest chain (each row: the return address and frame; a function that tail-calls counts 0, its callee takes its place):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "bytes\tframe\tsource\t \tfunction\tsource line\t\n")
	var sum uint64
	for _, l := range chain {
		fn := l.Function
		mark := ""
		switch {
		case fn.Recursive:
			n := len(a.Cycles[fn.Cycle])
			mark = "(recursive: one round of its cycle"
			if n > 1 {
				mark = fmt.Sprintf("(recursive: one round of its cycle of %d functions", n)
			}
			mark += ")"
		case l.Tail:
			mark = "(tail call)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t \t%s %s\t%s\t\n", Count(l.Bytes), frameBytesText(fn), fn.Source, Printable(fn.Demangled), mark, functionLine(fn))
		sum += l.Bytes
	}
	tw.Flush()
	if rest := entry.Depth - min(sum, entry.Depth); rest > 0 {
		last := chain[len(chain)-1].Function
		if last.RedZone == rest {
			fmt.Fprintf(w, "  + %s bytes that %s writes below its stack pointer (a leaf's red zone)\n", Count(rest), Printable(last.Demangled))
		} else {
			fmt.Fprintf(w, "  + %s bytes: the return address of a call out of the binary or through a pointer, whose callee's stack is not known\n", Count(rest))
		}
	}
	writeReach(w, a, entry)
}

// verdict says how far an entry's worst case can be trusted.
func stackVerdict(fn *stackdepth.Function) string {
	switch {
	case fn.Unbounded:
		return fmt.Sprintf("unbounded (recursion); %s bytes with each recursion taken once, and more per round\n", Count(fn.Depth))
	case fn.Incomplete:
		return fmt.Sprintf("at least %s bytes (incomplete: calls or frames below are not counted)\n", Count(fn.Depth))
	}
	return fmt.Sprintf("%s bytes (complete: no recursion, no calls through pointers or to other libraries, no frames of run-time size)\n", Count(fn.Depth))
}

// writeReach lists what the entry's bound does not count.
func writeReach(w io.Writer, a *stackdepth.Analysis, entry *stackdepth.Function) {
	r := a.Reach(entry)
	if len(r.Cycles)+len(r.Indirect)+len(r.External)+len(r.Dynamic) == 0 {
		return
	}
	fmt.Fprintf(w, "Not counted (of %d functions reachable from %s):\n", r.Functions, Printable(entry.Demangled))
	if len(r.Cycles) > 0 {
		fmt.Fprintf(w, "  recursion, unbounded: %d cycle(s)\n", len(r.Cycles))
		for _, c := range r.Cycles {
			var members []*stackdepth.Function
			for _, i := range a.Cycles[c] {
				members = append(members, a.Functions[i])
			}
			fmt.Fprintf(w, "    %s (%s): up to %s bytes a round\n", functionNames(members, 6), functionLine(members[0]), Count(a.Round(c)))
		}
	}
	if len(r.Indirect) > 0 {
		fmt.Fprintf(w, "  calls through pointers (callee unknown): %d function(s)\n", len(r.Indirect))
		for _, fn := range functionsByAddress(r.Indirect) {
			fmt.Fprintf(w, "    %s (%s): %d call(s)\n", Printable(fn.Demangled), functionLine(fn), r.Indirect[fn])
		}
	}
	if len(r.External) > 0 {
		fmt.Fprintf(w, "  functions of other libraries (their stack is not known; analyze the library too): %d\n", len(r.External))
		names := make([]string, 0, len(r.External))
		for name := range r.External {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			fmt.Fprintf(w, "    %s, from %s\n", Printable(name), functionNames(r.External[name], 4))
		}
	}
	if len(r.Dynamic) > 0 {
		fmt.Fprintf(w, "  frames that grow at run time (alloca, VLAs): %s\n", functionNames(r.Dynamic, 8))
	}
}

// writeLargest writes the n largest frames.
func writeLargest(w io.Writer, a *stackdepth.Analysis, n int) {
	fns := a.Largest(n)
	fmt.Fprintf(w, "\nLargest frames:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "frame\tsource\tred zone\tworst case\t \tfunction\tsource line\t\n")
	for _, fn := range fns {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t \t%s\t%s\t\n", frameBytesText(fn), fn.Source, Count(fn.RedZone), worstCaseText(fn), Printable(fn.Demangled), functionLine(fn))
	}
	tw.Flush()
}

// writeMeasured writes the comparison with a recording.
func writeStackMeasured(w io.Writer, c *stackdepth.Comparison) {
	fmt.Fprintf(w, "\nMeasured in %s (%s, pid %d):\n", Printable(c.Trace), Printable(filepath.Base(c.Program)), c.PID)
	if c.NoMeasures {
		fmt.Fprintf(w, "  the trace has no stack measures (recorded before memtrail measured stacks)\n")
		return
	}
	for _, t := range c.Threads {
		kind := "high-water mark"
		if t.SampledOnly {
			kind = "deepest sample"
		}
		fmt.Fprintf(w, "  thread %d: %s %s bytes", t.Thread, kind, Count(t.Measured))
		if t.Root == nil {
			fmt.Fprintf(w, "; no sample ran through this binary's functions, so no bound to compare with\n")
			continue
		}
		above := "not known: no heap event had a call stack of this binary's functions out to " + Printable(t.Root.Demangled) + "; counted as 0"
		if t.AboveKnown {
			above = fmt.Sprintf("%s bytes above %s (stack base to its CFA: arguments, environment and start-up frames, or the thread's control block; from %d sample(s))", Count(t.AboveRoot), Printable(t.Root.Demangled), t.Samples)
		}
		fmt.Fprintf(w, "; static bound %s bytes = %s + %s from %s\n", Count(t.Bound), above, Count(t.Root.Depth), Printable(t.Root.Demangled))
		switch {
		case t.Exceeded:
			fmt.Fprintf(w, "    EXCEEDS the bound by %s bytes: the bound missed %s\n", Count(t.Measured-t.Bound), boundMissed(t))
		default:
			fmt.Fprintf(w, "    within the bound (%s bytes to spare)\n", Count(t.Bound-t.Measured))
		}
	}
}

// missed says what a bound that was exceeded left out.
func boundMissed(t stackdepth.ThreadBound) string {
	var why []string
	if t.Unbounded {
		why = append(why, "recursion deeper than one round")
	}
	if t.IncompleteReason {
		why = append(why, "calls through pointers or into other libraries, or frames of run-time size (see above)")
	}
	if !t.AboveKnown {
		why = append(why, "the stack above "+Printable(t.Root.Demangled))
	}
	if len(why) == 0 {
		why = append(why, "something it should not have: the allocator's and memtrail's own frames below a heap call count in the measure")
	}
	return strings.Join(why, "; ")
}

func frameBytesText(fn *stackdepth.Function) string {
	switch {
	case fn.Source == "":
		return "?"
	case fn.Dynamic && !fn.Bounded:
		return Count(fn.Frame) + "+?"
	}
	return Count(fn.Frame)
}

func worstCaseText(fn *stackdepth.Function) string {
	switch {
	case fn.Unbounded:
		return "unbounded"
	case fn.Incomplete:
		return ">=" + Count(fn.Depth)
	}
	return Count(fn.Depth)
}

func functionLine(fn *stackdepth.Function) string {
	if fn.File == "" {
		return "?"
	}
	return fmt.Sprintf("%s:%d", Printable(filepath.Base(fn.File)), fn.Line)
}

func functionsByAddress(m map[*stackdepth.Function]int) []*stackdepth.Function {
	fns := make([]*stackdepth.Function, 0, len(m))
	for fn := range m {
		fns = append(fns, fn)
	}
	slices.SortFunc(fns, func(x, y *stackdepth.Function) int { return cmp.Compare(x.Addr, y.Addr) })
	return fns
}

func functionNames(fns []*stackdepth.Function, most int) string {
	var names []string
	for i, fn := range fns {
		if i == most {
			names = append(names, fmt.Sprintf("and %d more", len(fns)-most))
			break
		}
		names = append(names, Printable(fn.Demangled))
	}
	return strings.Join(names, ", ")
}

// JSON forms of the report: keys in snake_case, sizes in bytes.
type (
	jsonStackReport struct {
		Binary    string              `json:"binary"`
		Entries   []jsonStackEntry    `json:"entries"`
		Functions []jsonStackFunction `json:"functions"`
		Measured  *jsonStackMeasured  `json:"measured,omitempty"`
		Notes     []string            `json:"notes"`
	}
	jsonStackEntry struct {
		Function   string          `json:"function"`
		DepthBytes uint64          `json:"depth_bytes"`
		Unbounded  bool            `json:"unbounded"`
		Incomplete bool            `json:"incomplete"`
		Chain      []jsonStackLink `json:"chain"`
		Cycles     [][]string      `json:"cycles"`
		Indirect   map[string]int  `json:"indirect_calls"`
		External   map[string]int  `json:"external_calls"`
		Dynamic    []string        `json:"dynamic_frames"`
	}
	jsonStackLink struct {
		Function   string            `json:"function"`
		Bytes      uint64            `json:"bytes"`
		FrameBytes uint64            `json:"frame_bytes"`
		Source     stackdepth.Source `json:"source"`
		Tail       bool              `json:"tail_call"`
		Recursive  bool              `json:"recursive"`
		File       string            `json:"file"`
		Line       int               `json:"line"`
	}
	jsonStackFunction struct {
		Name            string            `json:"name"`
		Address         uint64            `json:"address"`
		Size            uint64            `json:"size"`
		FrameBytes      uint64            `json:"frame_bytes"`
		Source          stackdepth.Source `json:"source"`
		CFIFrameBytes   int64             `json:"cfi_frame_bytes"`
		CodeFrameBytes  int64             `json:"code_frame_bytes"`
		StackUsageBytes int64             `json:"stack_usage_bytes"`
		RedZoneBytes    uint64            `json:"red_zone_bytes"`
		Dynamic         bool              `json:"dynamic"`
		Bounded         bool              `json:"bounded"`
		DepthBytes      uint64            `json:"depth_bytes"`
		Recursive       bool              `json:"recursive"`
		Unbounded       bool              `json:"unbounded"`
		Incomplete      bool              `json:"incomplete"`
		File            string            `json:"file"`
		Line            int               `json:"line"`
	}
	jsonStackMeasured struct {
		Trace          string            `json:"trace"`
		PID            uint64            `json:"pid"`
		StackPeakBytes uint64            `json:"stack_peak_bytes"`
		Threads        []jsonStackThread `json:"threads"`
	}
	jsonStackThread struct {
		Thread          uint64 `json:"thread"`
		MeasuredBytes   uint64 `json:"measured_bytes"`
		SampledOnly     bool   `json:"sampled_only"`
		Root            string `json:"root"`
		AboveRootBytes  uint64 `json:"above_root_bytes"`
		AboveRootKnown  bool   `json:"above_root_known"`
		StaticBound     uint64 `json:"bound_bytes"`
		Exceeded        bool   `json:"exceeded"`
		BoundUnbounded  bool   `json:"bound_unbounded"`
		BoundIncomplete bool   `json:"bound_incomplete"`
	}
)

// WriteStackJSON writes the report of memtrail stack as one JSON object.
func WriteStackJSON(w io.Writer, a *stackdepth.Analysis, opts StackOptions) error {
	rep := jsonStackReport{Binary: a.Path, Notes: a.Notes, Entries: []jsonStackEntry{}, Functions: []jsonStackFunction{}}
	if rep.Notes == nil {
		rep.Notes = []string{}
	}
	for _, entry := range opts.Entries {
		rep.Entries = append(rep.Entries, stackEntryJSON(a, entry))
	}
	for _, fn := range a.Largest(opts.Top) {
		rep.Functions = append(rep.Functions, jsonStackFunction{
			Name: fn.Demangled, Address: fn.Addr, Size: fn.Size, FrameBytes: fn.Frame, Source: fn.Source,
			CFIFrameBytes: fn.CFIFrame, CodeFrameBytes: fn.CodeFrame, StackUsageBytes: fn.StackUsage,
			RedZoneBytes: fn.RedZone, Dynamic: fn.Dynamic, Bounded: fn.Bounded, DepthBytes: fn.Depth,
			Recursive: fn.Recursive, Unbounded: fn.Unbounded, Incomplete: fn.Incomplete, File: fn.File, Line: fn.Line,
		})
	}
	if c := opts.Measured; c != nil {
		m := &jsonStackMeasured{Trace: c.Trace, PID: c.PID, StackPeakBytes: c.StackPeak, Threads: []jsonStackThread{}}
		for _, t := range c.Threads {
			jt := jsonStackThread{Thread: t.Thread, MeasuredBytes: t.Measured, SampledOnly: t.SampledOnly,
				AboveRootBytes: t.AboveRoot, AboveRootKnown: t.AboveKnown, StaticBound: t.Bound, Exceeded: t.Exceeded,
				BoundUnbounded: t.Unbounded, BoundIncomplete: t.IncompleteReason}
			if t.Root != nil {
				jt.Root = t.Root.Demangled
			}
			m.Threads = append(m.Threads, jt)
		}
		rep.Measured = m
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func stackEntryJSON(a *stackdepth.Analysis, entry *stackdepth.Function) jsonStackEntry {
	je := jsonStackEntry{Function: entry.Demangled, DepthBytes: entry.Depth, Unbounded: entry.Unbounded, Incomplete: entry.Incomplete,
		Cycles: [][]string{}, Indirect: map[string]int{}, External: map[string]int{}, Dynamic: []string{}}
	for _, l := range a.Chain(entry) {
		fn := l.Function
		je.Chain = append(je.Chain, jsonStackLink{Function: fn.Demangled, Bytes: l.Bytes, FrameBytes: fn.Frame, Source: fn.Source,
			Tail: l.Tail, Recursive: fn.Recursive, File: fn.File, Line: fn.Line})
	}
	r := a.Reach(entry)
	for _, c := range r.Cycles {
		var names []string
		for _, i := range a.Cycles[c] {
			names = append(names, a.Functions[i].Demangled)
		}
		je.Cycles = append(je.Cycles, names)
	}
	for fn, n := range r.Indirect {
		je.Indirect[fn.Demangled] += n
	}
	for name, callers := range r.External {
		je.External[name] = len(callers)
	}
	for _, fn := range r.Dynamic {
		je.Dynamic = append(je.Dynamic, fn.Demangled)
	}
	return je
}
