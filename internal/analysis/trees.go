package analysis

import (
	"cmp"
	"slices"
)

// TreeNode is a node of heaptrack's top-down or bottom-up tree of call
// stacks: a function reached by one path of calls, and the cost of the
// stacks that go through it there.
//
// The trees merge the frames of a path by function (Frame.Name and
// object), not by the line of the call: a function is one node under each
// of its callers however many places it calls from, as a tree of
// functions reads best. Frame keeps the file and line if all the frames
// merged into the node have the same, and says that the node is inlined if
// they all are.
type TreeNode struct {
	Frame    Frame  // zero at the root
	Cost     uint64 // of the stacks through the node
	Self     uint64 // of the stacks that end at the node
	Children []*TreeNode

	byFunction map[function]*TreeNode // while the tree is built
}

// TopDown returns heaptrack's top-down tree of the sites of p, weighed by
// cost: from main (or the outermost frame of a stack without main) inward
// to the functions that called the allocator. The root stands for all the
// sites: its cost is their sum. Sites that cost nothing are left out.
// Self is what a function allocated itself.
func (p *Process) TopDown(sites []*Site, cost Cost) *TreeNode {
	return p.tree(sites, cost, true)
}

// BottomUp returns heaptrack's bottom-up tree of the sites of p, weighed by
// cost: from the functions that called the allocator outward to their
// callers, and theirs. Self is what came from stacks that end there, at
// main for most.
func (p *Process) BottomUp(sites []*Site, cost Cost) *TreeNode {
	return p.tree(sites, cost, false)
}

// tree builds a tree of the stacks of sites:
//
//  1. Take each site's stack, from main inward if topDown, else from the
//     allocator's caller outward; leave out the sites that cost nothing.
//  2. Walk down the tree from the root along the stack's frames, making a
//     child for a function not yet under the node reached, and add the
//     site's cost to each node on the way; the last frame's node also
//     counts it as its own.
//  3. Sort each node's children by cost, most first.
func (p *Process) tree(sites []*Site, cost Cost, topDown bool) *TreeNode {
	root := &TreeNode{}
	for _, s := range sites {
		c := cost.Of(s)
		if c == 0 {
			continue
		}
		frames := p.programStack(s)
		root.Cost += c
		n := root
		for i := range frames {
			f := frames[i]
			if topDown {
				f = frames[len(frames)-1-i]
			}
			n = n.child(f)
			n.Cost += c
		}
		n.Self += c
	}
	root.finish()
	return root
}

// child returns the child of n for the function of f, making it if needed.
func (n *TreeNode) child(f Frame) *TreeNode {
	fn := functionOf(f)
	if c, ok := n.byFunction[fn]; ok {
		mergeFrame(&c.Frame, f)
		return c
	}
	if n.byFunction == nil {
		n.byFunction = make(map[function]*TreeNode)
	}
	c := &TreeNode{Frame: f}
	n.byFunction[fn] = c
	n.Children = append(n.Children, c)
	return c
}

// finish sorts the children of the tree under n and drops what building
// needed.
func (n *TreeNode) finish() {
	stack := []*TreeNode{n}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n.byFunction = nil
		slices.SortFunc(n.Children, func(a, b *TreeNode) int {
			return cmp.Or(cmpUint(b.Cost, a.Cost), compareFunctions(functionOf(a.Frame), functionOf(b.Frame)))
		})
		stack = append(stack, n.Children...)
	}
}

// FunctionCost is a row of heaptrack's caller/callee view: a function, its
// cost with and without its callees, and the share of that cost that came
// through each of its callers and went through each of its callees.
type FunctionCost struct {
	// Frame is the function's, with the file and line if all its frames
	// have the same, and inlined if they all are.
	Frame     Frame
	Inclusive uint64 // of the stacks through the function
	Self      uint64 // of the stacks on which it called the allocator
	Callers   []FunctionShare
	Callees   []FunctionShare
}

// FunctionShare is a caller or callee of a function and the cost of the
// stacks on which the two called one another.
type FunctionShare struct {
	Function, Object string
	Cost             uint64
}

// CallersCallees returns the functions on the stacks of sites of p, weighed
// by cost, most inclusive cost first. The frames are merged by function.
// A stack counts once for each function on it, and once for each pair of
// caller and callee, however often it recurses through them: a function
// that calls itself is its own caller and callee.
func (p *Process) CallersCallees(sites []*Site, cost Cost) []FunctionCost {
	rows := make(map[function]*functionRow)
	for _, s := range sites {
		c := cost.Of(s)
		if c == 0 {
			continue
		}
		addCallStack(rows, p.programStack(s), c)
	}
	list := make([]FunctionCost, 0, len(rows))
	for _, r := range rows {
		list = append(list, FunctionCost{Frame: r.frame, Inclusive: r.inclusive, Self: r.self,
			Callers: shares(r.callers), Callees: shares(r.callees)})
	}
	slices.SortFunc(list, func(a, b FunctionCost) int {
		return cmp.Or(cmpUint(b.Inclusive, a.Inclusive), cmpUint(b.Self, a.Self),
			compareFunctions(functionOf(a.Frame), functionOf(b.Frame)))
	})
	return list
}

// functionRow is a FunctionCost being counted.
type functionRow struct {
	frame            Frame
	inclusive, self  uint64
	callers, callees map[function]uint64
}

// addCallStack counts a stack of cost c in the rows, each function and
// each pair of caller and callee once.
func addCallStack(rows map[function]*functionRow, frames []Frame, c uint64) {
	seen := make(map[function]bool)
	seenPair := make(map[[2]function]bool)
	var callee function
	for i, f := range frames {
		fn := functionOf(f)
		r := rows[fn]
		if r == nil {
			r = &functionRow{frame: f, callers: make(map[function]uint64), callees: make(map[function]uint64)}
			rows[fn] = r
		} else {
			mergeFrame(&r.frame, f)
		}
		if i == 0 {
			r.self += c
		}
		if !seen[fn] {
			seen[fn] = true
			r.inclusive += c
		}
		if i > 0 && !seenPair[[2]function{fn, callee}] {
			seenPair[[2]function{fn, callee}] = true
			r.callees[callee] += c
			rows[callee].callers[fn] += c
		}
		callee = fn
	}
}

// shares lists the functions of a map of costs, most cost first.
func shares(costs map[function]uint64) []FunctionShare {
	list := make([]FunctionShare, 0, len(costs))
	for fn, c := range costs {
		list = append(list, FunctionShare{Function: fn.name, Object: fn.object, Cost: c})
	}
	slices.SortFunc(list, func(a, b FunctionShare) int {
		return cmp.Or(cmpUint(b.Cost, a.Cost),
			compareFunctions(function{a.Function, a.Object}, function{b.Function, b.Object}))
	})
	return list
}
