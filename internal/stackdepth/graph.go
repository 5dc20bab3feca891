package stackdepth

import (
	"slices"
)

// mergeFragments folds each ".cold" fragment into its function: its code
// runs on that function's frame (its CFI offsets are from the same CFA),
// so its depths, red zone and calls are the function's.
func (a *Analysis) mergeFragments() {
	for _, frag := range a.Functions {
		if frag.Fragment == fragmentOfUnknown {
			frag.Fragment = -1 // no function jumps to it: it stands alone
		}
		if frag.Fragment < 0 {
			continue
		}
		fn := a.Functions[frag.Fragment]
		if frag.CFIFrame > fn.CFIFrame && fn.CFIFrame >= 0 {
			fn.CFIFrame = frag.CFIFrame
		}
		if frag.CodeFrame > fn.CodeFrame && fn.CodeFrame >= 0 {
			fn.CodeFrame = frag.CodeFrame
		}
		if frag.Source != "" && frag.Frame > fn.Frame {
			fn.Frame = frag.Frame
		}
		fn.RedZone = max(fn.RedZone, frag.RedZone)
		fn.Dynamic = fn.Dynamic || frag.Dynamic
		fn.Calls = append(fn.Calls, frag.Calls...)
		frag.Calls = nil
	}
}

// own is what a function's call puts on the stack by itself: its return
// address and its frame.
func own(fn *Function) uint64 { return returnAddress + fn.Frame }

// computeDepths finds the recursions and each function's worst case (see
// the package comment, step 4).
func (a *Analysis) computeDepths() {
	for _, scc := range a.components() {
		recursive := len(scc) > 1
		if !recursive {
			for _, c := range a.Functions[scc[0]].Calls {
				if (c.Kind == Direct || c.Kind == Tail) && c.Callee >= 0 && a.owner(c.Callee) == scc[0] {
					recursive = true
				}
			}
		}
		if recursive {
			a.recursionDepth(scc)
		} else {
			a.functionDepth(scc[0])
		}
	}
}

// functionDepth computes the worst case of function i, whose callees'
// are known.
func (a *Analysis) functionDepth(i int) {
	fn := a.Functions[i]
	fn.Depth = own(fn) + fn.RedZone
	fn.Incomplete = fn.Dynamic && !fn.Bounded
	for _, c := range fn.Calls {
		var depth uint64
		switch c.Kind {
		case Direct, Tail:
			callee := a.Functions[a.owner(c.Callee)]
			fn.Unbounded = fn.Unbounded || callee.Unbounded
			fn.Incomplete = fn.Incomplete || callee.Incomplete
			depth = callee.Depth
			if c.Kind == Direct {
				depth += own(fn)
			}
			if depth > fn.Depth {
				fn.Depth, fn.next, fn.nextTail = depth, a.owner(c.Callee), c.Kind == Tail
			}
			continue
		case External, Indirect:
			fn.Incomplete = true
			depth = own(fn) + returnAddress
		}
		if depth > fn.Depth {
			fn.Depth, fn.next = depth, -1
		}
	}
}

// recursionDepth computes the worst case of the members of a recursion:
// each member counted once (one round of the cycle) and the deepest
// callee outside it. They are all unbounded.
func (a *Analysis) recursionDepth(scc []int) {
	slices.SortFunc(scc, func(x, y int) int { return cmpUint(a.Functions[x].Addr, a.Functions[y].Addr) })
	cycle := len(a.Cycles)
	a.Cycles = append(a.Cycles, scc)
	inside := map[int]bool{}
	var round, redZone uint64
	incomplete := false
	for _, i := range scc {
		inside[i] = true
		fn := a.Functions[i]
		round += own(fn)
		redZone = max(redZone, fn.RedZone)
		incomplete = incomplete || fn.Dynamic && !fn.Bounded
	}
	var deepest uint64
	next, nextTail := -1, false
	for _, i := range scc {
		for _, c := range a.Functions[i].Calls {
			var depth uint64
			switch c.Kind {
			case Direct, Tail:
				callee := a.owner(c.Callee)
				if inside[callee] {
					continue
				}
				depth = a.Functions[callee].Depth
				incomplete = incomplete || a.Functions[callee].Incomplete
				if depth > deepest {
					deepest, next, nextTail = depth, callee, c.Kind == Tail
				}
				continue
			case External, Indirect:
				incomplete = true
				depth = returnAddress
			}
			if depth > deepest {
				deepest, next = depth, -1
			}
		}
	}
	for _, i := range scc {
		fn := a.Functions[i]
		fn.Depth = round + max(deepest, redZone)
		fn.Recursive, fn.Unbounded, fn.Incomplete, fn.Cycle = true, true, incomplete, cycle
		fn.next, fn.nextTail = next, nextTail
	}
}

// components returns the strongly connected components of the call graph
// of the functions (fragments are their functions), callees first
// (Tarjan's algorithm).
func (a *Analysis) components() [][]int {
	n := len(a.Functions)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	counter := 0
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = counter, counter
		counter++
		stack = append(stack, v)
		onStack[v] = true
		for _, c := range a.Functions[v].Calls {
			if (c.Kind != Direct && c.Kind != Tail) || c.Callee < 0 {
				continue
			}
			w := a.owner(c.Callee)
			switch {
			case index[w] < 0:
				visit(w)
				low[v] = min(low[v], low[w])
			case onStack[w]:
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var scc []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				scc = append(scc, w)
				if w == v {
					break
				}
			}
			out = append(out, scc)
		}
	}
	for v := range n {
		if index[v] < 0 && !a.Functions[v].IsFragment() {
			visit(v)
		}
	}
	return out
}

// Link is one function of a deepest chain.
type Link struct {
	Function *Function
	// Tail says that the function was reached by a tail call: it took
	// its caller's place on the stack.
	Tail bool
	// Bytes is what this link adds to the chain: its return address and
	// frame; nothing for a function that tail-calls the next (which
	// takes its place); for a recursion, one round of its cycle (every
	// member once).
	Bytes uint64
}

// Chain returns the deepest call chain from fn: each function and the
// callee that makes its worst case. A recursion is one link: the member
// the chain enters it by, counting one round of the cycle.
func (a *Analysis) Chain(fn *Function) []Link {
	var chain []Link
	seen := map[*Function]bool{}
	tail := false
	for fn != nil && !seen[fn] {
		seen[fn] = true
		link := Link{Function: fn, Tail: tail, Bytes: own(fn)}
		if fn.Recursive {
			link.Bytes = a.Round(fn.Cycle)
			for _, m := range a.Cycles[fn.Cycle] {
				seen[a.Functions[m]] = true
			}
		}
		var next *Function
		if fn.next >= 0 {
			next = a.Functions[fn.next]
			if fn.nextTail && !fn.Recursive {
				link.Bytes = 0 // the tail callee replaces fn on the stack
			}
		}
		chain = append(chain, link)
		fn, tail = next, fn.nextTail
	}
	return chain
}

// Round returns the stack one round of cycle (an index in Cycles) takes: each member's
// return address and frame.
func (a *Analysis) Round(cycle int) uint64 {
	var sum uint64
	for _, m := range a.Cycles[cycle] {
		sum += own(a.Functions[m])
	}
	return sum
}

// Roots returns the functions no other function calls directly, by
// address (fragments left out).
func (a *Analysis) Roots() []*Function {
	called := make([]bool, len(a.Functions))
	for i, fn := range a.Functions {
		for _, c := range fn.Calls {
			if (c.Kind == Direct || c.Kind == Tail) && c.Callee >= 0 && a.owner(c.Callee) != i {
				called[a.owner(c.Callee)] = true
			}
		}
	}
	var roots []*Function
	for i, fn := range a.Functions {
		if !called[i] && !fn.IsFragment() {
			roots = append(roots, fn)
		}
	}
	return roots
}

// Reach is what a function can reach that its worst case does not count.
type Reach struct {
	Functions int   // functions reachable, itself included
	Cycles    []int // indices in Analysis.Cycles
	// Indirect are the functions with calls through pointers, and how
	// many; External the functions of other libraries called, and by
	// whom; Dynamic the functions with frames of run-time size.
	Indirect map[*Function]int
	External map[string][]*Function
	Dynamic  []*Function
}

// Reach walks the call graph from fn.
func (a *Analysis) Reach(fn *Function) Reach {
	r := Reach{Indirect: map[*Function]int{}, External: map[string][]*Function{}}
	seen := map[int]bool{}
	cycles := map[int]bool{}
	work := []int{a.index(fn)}
	seen[work[0]] = true
	for len(work) > 0 {
		i := work[len(work)-1]
		work = work[:len(work)-1]
		f := a.Functions[i]
		r.Functions++
		if f.Recursive && !cycles[f.Cycle] {
			cycles[f.Cycle] = true
			r.Cycles = append(r.Cycles, f.Cycle)
		}
		if f.Dynamic && !f.Bounded {
			r.Dynamic = append(r.Dynamic, f)
		}
		for _, c := range f.Calls {
			switch c.Kind {
			case Direct, Tail:
				if j := a.owner(c.Callee); !seen[j] {
					seen[j] = true
					work = append(work, j)
				}
			case Indirect:
				r.Indirect[f]++
			case External:
				name := c.Name
				if name == "" {
					name = "?"
				}
				if callers := r.External[name]; len(callers) == 0 || callers[len(callers)-1] != f {
					r.External[name] = append(callers, f)
				}
			}
		}
	}
	slices.Sort(r.Cycles)
	slices.SortFunc(r.Dynamic, func(x, y *Function) int { return cmpUint(x.Addr, y.Addr) })
	return r
}

// Largest returns the n functions with the largest frames (all for 0).
func (a *Analysis) Largest(n int) []*Function {
	var fns []*Function
	for _, fn := range a.Functions {
		if !fn.IsFragment() {
			fns = append(fns, fn)
		}
	}
	slices.SortStableFunc(fns, func(x, y *Function) int { return cmpUint(y.Frame, x.Frame) })
	if n > 0 && len(fns) > n {
		fns = fns[:n]
	}
	return fns
}
