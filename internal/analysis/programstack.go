package analysis

import "cmp"

// The tables, call graphs and trees read the stacks of sites from the
// allocator's caller out to main. The frames outside main, the C runtime's
// start-up (_start, __libc_start_main...), are the same on every stack of
// the main thread: they would only add levels at 100% to every tree and
// the same callers to every chain. mprof's stacks stopped at main too: its
// leak table reads "main > make_red_widget > make_widget". Stacks without
// main (those of other threads) are kept whole.

// noStack stands for the frames of a site without a call stack, so that
// what was allocated there still counts in the tables and trees.
var noStack = []Frame{{Function: "(no call stack)"}}

// programStack returns the frames of the stack of site s, innermost first,
// up to the outermost frame of main.
func (p *Process) programStack(s *Site) []Frame {
	frames := p.SiteStack(s)
	if len(frames) == 0 {
		return noStack
	}
	if i := OutermostMain(frames); i >= 0 {
		return frames[:i+1]
	}
	return frames
}

// OutermostMain returns the index of the outermost frame of main in
// frames, innermost first: the frames after it are the C runtime's
// start-up, which the tables and trees leave out. It returns -1 for a
// stack without main.
func OutermostMain(frames []Frame) int {
	for i := len(frames) - 1; i >= 0; i-- {
		if frames[i].Function == "main" {
			return i
		}
	}
	return -1
}

// function identifies a function across stacks: its name, and the object
// its code is in, so that static functions of one name in two libraries
// stay apart.
type function struct{ name, object string }

func functionOf(f Frame) function { return function{f.Name(), f.Object} }

// functionsOf returns the functions of frames, in their order.
func functionsOf(frames []Frame) []function {
	fns := make([]function, len(frames))
	for i, f := range frames {
		fns[i] = functionOf(f)
	}
	return fns
}

// mergeFrame makes into stand for itself and f, two frames of one
// function: the file and line stay only if they are the same, and the
// frame is inlined only if both are.
func mergeFrame(into *Frame, f Frame) {
	if into.File != f.File {
		into.File, into.Line = "", 0
	}
	if into.Line != f.Line {
		into.Line = 0
	}
	if into.Address != f.Address {
		into.Address = 0
	}
	into.Inlined = into.Inlined && f.Inlined
}

// compareFunctions orders functions by name, then object.
func compareFunctions(a, b function) int {
	return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.object, b.object))
}
