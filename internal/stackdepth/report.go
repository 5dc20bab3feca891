package stackdepth

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// ReportOptions say what a report shows.
type ReportOptions struct {
	// Entries are the functions whose worst case and deepest chain are
	// shown: main, the one -entry names, or every root.
	Entries []*Function
	// Top is how many functions the table of the largest frames lists
	// (and the JSON's functions; 0 there means all).
	Top int
	// Measured, if not nil, is the comparison with a recording.
	Measured *Comparison
}

// WriteText writes the report for people.
func WriteText(w io.Writer, a *Analysis, opts ReportOptions) error {
	bw := &errWriter{w: w}
	fmt.Fprintf(bw, "%s: %d functions; frames from %s\n", a.Path, a.countFunctions(), a.sourceSummary())
	for _, entry := range opts.Entries {
		a.writeEntry(bw, entry)
	}
	if opts.Top > 0 {
		a.writeLargest(bw, opts.Top)
	}
	if opts.Measured != nil {
		writeMeasured(bw, opts.Measured)
	}
	for _, n := range a.Notes {
		fmt.Fprintf(bw, "note: %s\n", n)
	}
	return bw.err
}

// countFunctions counts the functions, fragments left out.
func (a *Analysis) countFunctions() int {
	n := 0
	for _, fn := range a.Functions {
		if !fn.isFragment() {
			n++
		}
	}
	return n
}

// sourceSummary says how many frames came from where.
func (a *Analysis) sourceSummary() string {
	counts := map[Source]int{}
	for _, fn := range a.Functions {
		if !fn.isFragment() && fn.Source != "" {
			counts[fn.Source]++
		}
	}
	var parts []string
	for _, s := range []struct {
		src  Source
		what string
	}{
		{FromCFI, ".eh_frame"},
		{FromCFIAndCode, ".eh_frame and code (frame pointer)"},
		{FromCode, "code (no CFI)"},
		{FromStackUsage, "-fstack-usage"},
	} {
		if counts[s.src] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s.what, counts[s.src]))
		}
	}
	return strings.Join(parts, ", ")
}

// writeEntry writes an entry's worst case, deepest chain and what the
// bound leaves out.
func (a *Analysis) writeEntry(w io.Writer, entry *Function) {
	fmt.Fprintf(w, "\nWorst case from %s: %s", entry.Demangled, verdict(entry))
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t \t%s %s\t%s\t\n", byteCount(l.Bytes), frameText(fn), fn.Source, fn.Demangled, mark, location(fn))
		sum += l.Bytes
	}
	tw.Flush()
	if rest := entry.Depth - min(sum, entry.Depth); rest > 0 {
		last := chain[len(chain)-1].Function
		if last.RedZone == rest {
			fmt.Fprintf(w, "  + %s bytes that %s writes below its stack pointer (a leaf's red zone)\n", byteCount(rest), last.Demangled)
		} else {
			fmt.Fprintf(w, "  + %s bytes: the return address of a call out of the binary or through a pointer, whose callee's stack is not known\n", byteCount(rest))
		}
	}
	a.writeReach(w, entry)
}

// verdict says how far an entry's worst case can be trusted.
func verdict(fn *Function) string {
	switch {
	case fn.Unbounded:
		return fmt.Sprintf("unbounded (recursion); %s bytes with each recursion taken once, and more per round\n", byteCount(fn.Depth))
	case fn.Incomplete:
		return fmt.Sprintf("at least %s bytes (incomplete: calls or frames below are not counted)\n", byteCount(fn.Depth))
	}
	return fmt.Sprintf("%s bytes (complete: no recursion, no calls through pointers or to other libraries, no frames of run-time size)\n", byteCount(fn.Depth))
}

// writeReach lists what the entry's bound does not count.
func (a *Analysis) writeReach(w io.Writer, entry *Function) {
	r := a.Reach(entry)
	if len(r.Cycles)+len(r.Indirect)+len(r.External)+len(r.Dynamic) == 0 {
		return
	}
	fmt.Fprintf(w, "Not counted (of %d functions reachable from %s):\n", r.Functions, entry.Demangled)
	if len(r.Cycles) > 0 {
		fmt.Fprintf(w, "  recursion, unbounded: %d cycle(s)\n", len(r.Cycles))
		for _, c := range r.Cycles {
			var members []*Function
			for _, i := range a.Cycles[c] {
				members = append(members, a.Functions[i])
			}
			fmt.Fprintf(w, "    %s (%s): up to %s bytes a round\n", functionNames(members, 6), location(members[0]), byteCount(a.round(c)))
		}
	}
	if len(r.Indirect) > 0 {
		fmt.Fprintf(w, "  calls through pointers (callee unknown): %d function(s)\n", len(r.Indirect))
		for _, fn := range sortedFunctions(r.Indirect) {
			fmt.Fprintf(w, "    %s (%s): %d call(s)\n", fn.Demangled, location(fn), r.Indirect[fn])
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
			fmt.Fprintf(w, "    %s, from %s\n", name, functionNames(r.External[name], 4))
		}
	}
	if len(r.Dynamic) > 0 {
		fmt.Fprintf(w, "  frames that grow at run time (alloca, VLAs): %s\n", functionNames(r.Dynamic, 8))
	}
}

// writeLargest writes the n largest frames.
func (a *Analysis) writeLargest(w io.Writer, n int) {
	fns := a.largest(n)
	fmt.Fprintf(w, "\nLargest frames:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "frame\tsource\tred zone\tworst case\t \tfunction\tsource line\t\n")
	for _, fn := range fns {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t \t%s\t%s\t\n", frameText(fn), fn.Source, byteCount(fn.RedZone), depthText(fn), fn.Demangled, location(fn))
	}
	tw.Flush()
}

// largest returns the n functions with the largest frames (all for 0).
func (a *Analysis) largest(n int) []*Function {
	var fns []*Function
	for _, fn := range a.Functions {
		if !fn.isFragment() {
			fns = append(fns, fn)
		}
	}
	slices.SortStableFunc(fns, func(x, y *Function) int { return cmpUint(y.Frame, x.Frame) })
	if n > 0 && len(fns) > n {
		fns = fns[:n]
	}
	return fns
}

// writeMeasured writes the comparison with a recording.
func writeMeasured(w io.Writer, c *Comparison) {
	fmt.Fprintf(w, "\nMeasured in %s (%s, pid %d):\n", c.Trace, filepath.Base(c.Program), c.PID)
	if c.NoMeasures {
		fmt.Fprintf(w, "  the trace has no stack measures (recorded before memtrail measured stacks)\n")
		return
	}
	for _, t := range c.Threads {
		kind := "high-water mark"
		if t.SampledOnly {
			kind = "deepest sample"
		}
		fmt.Fprintf(w, "  thread %d: %s %s bytes", t.Thread, kind, byteCount(t.Measured))
		if t.Root == nil {
			fmt.Fprintf(w, "; no sample ran through this binary's functions, so no bound to compare with\n")
			continue
		}
		above := "not known: no heap event had a call stack of this binary's functions out to " + t.Root.Demangled + "; counted as 0"
		if t.AboveKnown {
			above = fmt.Sprintf("%s bytes above %s (stack base to its CFA: arguments, environment and start-up frames, or the thread's control block; from %d sample(s))", byteCount(t.AboveRoot), t.Root.Demangled, t.Samples)
		}
		fmt.Fprintf(w, "; static bound %s bytes = %s + %s from %s\n", byteCount(t.Bound), above, byteCount(t.Root.Depth), t.Root.Demangled)
		switch {
		case t.Exceeded:
			fmt.Fprintf(w, "    EXCEEDS the bound by %s bytes: the bound missed %s\n", byteCount(t.Measured-t.Bound), missed(t))
		default:
			fmt.Fprintf(w, "    within the bound (%s bytes to spare)\n", byteCount(t.Bound-t.Measured))
		}
	}
}

// missed says what a bound that was exceeded left out.
func missed(t ThreadBound) string {
	var why []string
	if t.Unbounded {
		why = append(why, "recursion deeper than one round")
	}
	if t.IncompleteReason {
		why = append(why, "calls through pointers or into other libraries, or frames of run-time size (see above)")
	}
	if !t.AboveKnown {
		why = append(why, "the stack above "+t.Root.Demangled)
	}
	if len(why) == 0 {
		why = append(why, "something it should not have: the allocator's and memtrail's own frames below a heap call count in the measure")
	}
	return strings.Join(why, "; ")
}

func frameText(fn *Function) string {
	switch {
	case fn.Source == "":
		return "?"
	case fn.Dynamic && !fn.Bounded:
		return byteCount(fn.Frame) + "+?"
	}
	return byteCount(fn.Frame)
}

func depthText(fn *Function) string {
	switch {
	case fn.Unbounded:
		return "unbounded"
	case fn.Incomplete:
		return ">=" + byteCount(fn.Depth)
	}
	return byteCount(fn.Depth)
}

func location(fn *Function) string {
	if fn.File == "" {
		return "?"
	}
	return fmt.Sprintf("%s:%d", filepath.Base(fn.File), fn.Line)
}

func sortedFunctions(m map[*Function]int) []*Function {
	fns := make([]*Function, 0, len(m))
	for fn := range m {
		fns = append(fns, fn)
	}
	slices.SortFunc(fns, func(x, y *Function) int { return cmpUint(x.Addr, y.Addr) })
	return fns
}

func functionNames(fns []*Function, most int) string {
	var names []string
	for i, fn := range fns {
		if i == most {
			names = append(names, fmt.Sprintf("and %d more", len(fns)-most))
			break
		}
		names = append(names, fn.Demangled)
	}
	return strings.Join(names, ", ")
}

// byteCount writes n with thousands separators.
func byteCount(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// JSON forms of the report: keys in snake_case, sizes in bytes.
type (
	jsonReport struct {
		Binary    string         `json:"binary"`
		Entries   []jsonEntry    `json:"entries"`
		Functions []jsonFunction `json:"functions"`
		Measured  *jsonMeasured  `json:"measured,omitempty"`
		Notes     []string       `json:"notes"`
	}
	jsonEntry struct {
		Function   string         `json:"function"`
		DepthBytes uint64         `json:"depth_bytes"`
		Unbounded  bool           `json:"unbounded"`
		Incomplete bool           `json:"incomplete"`
		Chain      []jsonLink     `json:"chain"`
		Cycles     [][]string     `json:"cycles"`
		Indirect   map[string]int `json:"indirect_calls"`
		External   map[string]int `json:"external_calls"`
		Dynamic    []string       `json:"dynamic_frames"`
	}
	jsonLink struct {
		Function   string `json:"function"`
		Bytes      uint64 `json:"bytes"`
		FrameBytes uint64 `json:"frame_bytes"`
		Source     Source `json:"source"`
		Tail       bool   `json:"tail_call"`
		Recursive  bool   `json:"recursive"`
		File       string `json:"file"`
		Line       int    `json:"line"`
	}
	jsonFunction struct {
		Name            string `json:"name"`
		Address         uint64 `json:"address"`
		Size            uint64 `json:"size"`
		FrameBytes      uint64 `json:"frame_bytes"`
		Source          Source `json:"source"`
		CFIFrameBytes   int64  `json:"cfi_frame_bytes"`
		CodeFrameBytes  int64  `json:"code_frame_bytes"`
		StackUsageBytes int64  `json:"stack_usage_bytes"`
		RedZoneBytes    uint64 `json:"red_zone_bytes"`
		Dynamic         bool   `json:"dynamic"`
		Bounded         bool   `json:"bounded"`
		DepthBytes      uint64 `json:"depth_bytes"`
		Recursive       bool   `json:"recursive"`
		Unbounded       bool   `json:"unbounded"`
		Incomplete      bool   `json:"incomplete"`
		File            string `json:"file"`
		Line            int    `json:"line"`
	}
	jsonMeasured struct {
		Trace          string       `json:"trace"`
		PID            uint64       `json:"pid"`
		StackPeakBytes uint64       `json:"stack_peak_bytes"`
		Threads        []jsonThread `json:"threads"`
	}
	jsonThread struct {
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

// WriteJSON writes the report as one JSON object.
func WriteJSON(w io.Writer, a *Analysis, opts ReportOptions) error {
	rep := jsonReport{Binary: a.Path, Notes: a.Notes, Entries: []jsonEntry{}, Functions: []jsonFunction{}}
	if rep.Notes == nil {
		rep.Notes = []string{}
	}
	for _, entry := range opts.Entries {
		rep.Entries = append(rep.Entries, a.jsonEntry(entry))
	}
	for _, fn := range a.largest(opts.Top) {
		rep.Functions = append(rep.Functions, jsonFunction{
			Name: fn.Demangled, Address: fn.Addr, Size: fn.Size, FrameBytes: fn.Frame, Source: fn.Source,
			CFIFrameBytes: fn.CFIFrame, CodeFrameBytes: fn.CodeFrame, StackUsageBytes: fn.StackUsage,
			RedZoneBytes: fn.RedZone, Dynamic: fn.Dynamic, Bounded: fn.Bounded, DepthBytes: fn.Depth,
			Recursive: fn.Recursive, Unbounded: fn.Unbounded, Incomplete: fn.Incomplete, File: fn.File, Line: fn.Line,
		})
	}
	if c := opts.Measured; c != nil {
		m := &jsonMeasured{Trace: c.Trace, PID: c.PID, StackPeakBytes: c.StackPeak, Threads: []jsonThread{}}
		for _, t := range c.Threads {
			jt := jsonThread{Thread: t.Thread, MeasuredBytes: t.Measured, SampledOnly: t.SampledOnly,
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

func (a *Analysis) jsonEntry(entry *Function) jsonEntry {
	je := jsonEntry{Function: entry.Demangled, DepthBytes: entry.Depth, Unbounded: entry.Unbounded, Incomplete: entry.Incomplete,
		Cycles: [][]string{}, Indirect: map[string]int{}, External: map[string]int{}, Dynamic: []string{}}
	for _, l := range a.Chain(entry) {
		fn := l.Function
		je.Chain = append(je.Chain, jsonLink{Function: fn.Demangled, Bytes: l.Bytes, FrameBytes: fn.Frame, Source: fn.Source,
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
