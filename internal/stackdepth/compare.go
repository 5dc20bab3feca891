package stackdepth

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace"
	"golang.org/x/arch/x86/x86asm"
)

// ThreadBound holds one recorded thread's stack high-water mark against
// the static bound.
//
// The recording measures a thread's stack from its base (the top of the
// stack: for the main thread, above the arguments, environment and
// auxiliary vector the kernel put there, and the frames of libc's
// start-up code; for another thread, glibc's thread control block), while
// the static bound starts at a function's entry. The part above is found
// from the trace: at each heap event the thread's stack in use is the
// part above plus, for each frame of the call stack from the allocator's
// caller out to the outermost function of this binary (the root: main,
// or a thread's start routine), the stack that frame held at its call
// (its CFA less the stack pointer at the call instruction, from the same
// walk of its code that gives its frame). What is left is the part above
// the root's frame.
type ThreadBound struct {
	Thread           uint64 // the thread's index in the trace
	Measured         uint64 // its stack peak: the high-water mark, or the deepest sample
	SampledOnly      bool   // Measured is the deepest sample only (no high-water mark)
	Root             *Function
	AboveRoot        uint64 // the stack above the root's CFA, from the thread's samples
	AboveKnown       bool   // some sample had a call stack of this binary's functions out to the root
	Samples          int    // how many samples agreed on AboveRoot
	Bound            uint64 // AboveRoot + Root.Depth
	Exceeded         bool   // the measured high-water mark is deeper than the bound
	Unbounded        bool   // the root reaches a recursion
	IncompleteReason bool   // the root reaches calls or frames the bound does not count
}

// Comparison is the measured stack of one recorded process of the binary
// against its static bounds.
type Comparison struct {
	Trace      string
	PID        uint64
	Program    string
	StackPeak  uint64 // all threads together, at heap events (Summary.StackPeakBytes)
	Threads    []ThreadBound
	NoMeasures bool // the trace has no stack measures (format version 1)
}

// Compare reads the recording at tracePath, whose analysis is m, and
// compares the stack of the first process running the binary (or the
// first process) with a's bounds. entry is the function the main
// thread's bound starts from when its samples name none.
func Compare(a *Analysis, m *analysis.Model, tracePath string, entry *Function) (*Comparison, error) {
	if len(m.Processes) == 0 {
		return nil, fmt.Errorf("%s holds no process", tracePath)
	}
	p := m.Processes[0]
	for _, q := range m.Processes {
		if filepath.Base(q.Exe) == filepath.Base(a.Path) {
			p = q
			break
		}
	}
	cmp := &Comparison{Trace: tracePath, PID: p.PID, Program: p.Exe, StackPeak: p.Summary.StackPeakBytes}
	above, err := a.aboveRoots(p, tracePath)
	if err != nil {
		return nil, err
	}
	for _, th := range p.Threads {
		tb := ThreadBound{Thread: th.Index, Measured: th.StackPeakBytes, SampledOnly: th.StackSampledOnly}
		if est, ok := above[th.Index]; ok {
			tb.Root, tb.AboveRoot, tb.AboveKnown, tb.Samples = est.root, est.above, true, est.samples
		} else if th.Index == 1 {
			tb.Root = entry
		}
		if tb.Root != nil {
			tb.Bound = tb.AboveRoot + tb.Root.Depth
			tb.Unbounded, tb.IncompleteReason = tb.Root.Unbounded, tb.Root.Incomplete
			tb.Exceeded = tb.Measured > tb.Bound
		}
		cmp.Threads = append(cmp.Threads, tb)
	}
	if cmp.StackPeak == 0 && len(above) == 0 {
		cmp.NoMeasures = true
	}
	return cmp, nil
}

// aboveEstimate is what a thread's samples say of the stack above its
// root.
type aboveEstimate struct {
	root    *Function
	above   uint64
	samples int
}

// stackDepth is what one call stack of the trace says: the root it runs
// out to and the stack its frames held, from the root's CFA down to the
// allocator's caller's stack pointer.
type stackDepth struct {
	root  *Function
	depth uint64
	ok    bool
}

// aboveRoots estimates, for each thread of p, the stack above its root
// (see ThreadBound).
func (a *Analysis) aboveRoots(p *analysis.Process, tracePath string) (map[uint64]aboveEstimate, error) {
	f, err := os.Open(tracePath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := trace.NewReader(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tracePath, err)
	}
	byStack := map[uint64]stackDepth{}
	out := map[uint64]aboveEstimate{}
	walks := map[int]*codeWalk{}
	for {
		events, _, err := r.NextBatch()
		if errors.Is(err, io.EOF) {
			break
		}
		var damage *trace.DamageError
		if err != nil && !errors.As(err, &damage) {
			return nil, fmt.Errorf("reading %s: %w", tracePath, err)
		}
		for i := range events {
			ev := &events[i]
			if ev.Process != p.ID || ev.StackInUse == 0 || ev.Stack == 0 {
				continue
			}
			sd, seen := byStack[ev.Stack]
			if !seen {
				sd = a.stackDepthOf(p.Stack(ev.Stack), walks)
				byStack[ev.Stack] = sd
			}
			if !sd.ok || sd.depth > ev.StackInUse {
				continue
			}
			above := ev.StackInUse - sd.depth
			est, have := out[ev.Thread]
			switch {
			case !have || above < est.above:
				// A lower estimate comes from a root further out.
				out[ev.Thread] = aboveEstimate{root: sd.root, above: above, samples: 1}
			case above == est.above:
				est.samples++
				out[ev.Thread] = est
			}
		}
	}
	return out, nil
}

// stackDepthOf sums, over the physical frames of a call stack (innermost
// first) that belong to this binary, from the allocator's caller out,
// the stack each held at its call.
func (a *Analysis) stackDepthOf(frames []analysis.Frame, walks map[int]*codeWalk) stackDepth {
	var sd stackDepth
	for _, fr := range frames {
		if fr.Inlined {
			continue
		}
		if fr.Object == "" || filepath.Base(fr.Object) != filepath.Base(a.Path) || fr.Address == 0 {
			break
		}
		i := a.functionAt(fr.Address - 1)
		if i < 0 {
			break
		}
		d, ok := a.depthAtCall(i, fr.Address, walks)
		if !ok {
			return stackDepth{}
		}
		sd.depth += d
		sd.root, sd.ok = a.Functions[a.owner(i)], true
	}
	return sd
}

// depthAtCall returns how much stack function i (or the function it is a part of) held at
// the call whose return address is ret: its CFA less the stack pointer
// before the call.
func (a *Analysis) depthAtCall(i int, ret uint64, walks map[int]*codeWalk) (uint64, bool) {
	w, ok := walks[i]
	if !ok {
		w = a.walk(i)
		walks[i] = w
	}
	if w == nil {
		return 0, false
	}
	for j, in := range w.insts {
		if in.addr+uint64(in.inst.Len) == ret && in.inst.Op == x86asm.CALL {
			if s := w.states[j]; s.depthKnown && s.depth >= 0 {
				return uint64(s.depth), true
			}
			return 0, false
		}
	}
	return 0, false
}
