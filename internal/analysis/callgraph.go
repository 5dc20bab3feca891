package analysis

import (
	"cmp"
	"fmt"
	"slices"
)

// CallGraph is mprof's allocation call graph, drawn as gprof draws its call
// graph: a node per function on the stacks that allocated, with the bytes
// it allocated itself and with its callees, and the arcs to its callers and
// callees with the bytes and calls that went through them.
//
// Functions that call each other in a cycle (a strongly connected
// component of the graph, as with mutual recursion) are merged into one
// node, as mprof and gprof do: otherwise an allocation made through
// f > g > f > g would count twice on the arc from f to g. A function that
// calls itself is not a cycle: its calls to itself are counted apart, as
// recursive calls.
type CallGraph struct {
	Bytes       uint64 // allocated on all the stacks
	Allocations uint64
	// Nodes are by bytes allocated by them and their callees, most first;
	// Nodes[i].Index is i+1.
	Nodes []*CallNode
}

// CallNode is a function of the call graph, or a cycle of functions.
type CallNode struct {
	Index    int    // gprof's [index], from 1
	Function string // Frame.Name of the function; "" for a cycle
	Object   string
	// Cycle numbers the cycles from 1, in the order of Nodes; 0 if the
	// node is a single function.
	Cycle   int
	Members []CycleMember // the functions of a cycle, by name

	SelfBytes  uint64 // allocated by the node's functions themselves
	SelfBySize [SizeCategories]uint64
	TotalBytes uint64 // allocated by the node and its callees (self + descendants)
	Called     uint64 // allocations that went through a call to the node from another
	Recursive  uint64 // calls of the node to itself (or within its cycle) on the way to those
	Parents    []CallArc
	Children   []CallArc
}

// Name writes the function of n, or "<cycle N>".
func (n *CallNode) Name() string {
	if n.Cycle > 0 {
		return fmt.Sprintf("<cycle %d>", n.Cycle)
	}
	return n.Function
}

// CycleMember is a function of a cycle and what it allocated itself.
type CycleMember struct {
	Function, Object string
	SelfBytes        uint64
	SelfBySize       [SizeCategories]uint64
	Allocations      uint64 // made by the function itself
}

// CallArc is a call from one node of the call graph to another: the
// allocations made under it, and the bytes they allocated.
type CallArc struct {
	Node   *CallNode // the caller, in Parents; the callee, in Children
	Bytes  uint64
	BySize [SizeCategories]uint64
	Calls  uint64 // allocations made under the call
}

// CallGraph returns the allocation call graph of the sites of p.
//
// Each function is counted once per stack: the nodes of a cycle are
// strongly connected, so a stack through a node passes through it in one
// run of frames, entered once and left once. A stack's bytes count in the
// total of each node it passes through, in the arc between two nodes that
// follow each other, and in the self bytes of the innermost node.
func (p *Process) CallGraph(sites []*Site) *CallGraph {
	stacks := make([][]function, len(sites))
	for i, s := range sites {
		stacks[i] = functionsOf(p.programStack(s))
	}
	ids, fns := numberFunctions(stacks)
	comp, ncomp := stronglyConnected(callEdges(stacks, ids, len(fns)))

	g := &CallGraph{}
	nodes := newCallNodes(fns, comp, ncomp)
	arcs := make(map[[2]int]*CallArc) // by caller and callee component
	for i, s := range sites {
		g.Bytes += s.BytesAllocated
		g.Allocations += s.Allocations
		addStack(nodes, arcs, stacks[i], ids, comp, s)
	}
	g.Nodes = orderCallNodes(nodes, arcs)
	return g
}

// numberFunctions gives each function of the stacks a number, in the order
// of their names.
func numberFunctions(stacks [][]function) (map[function]int, []function) {
	ids := make(map[function]int)
	var fns []function
	for _, st := range stacks {
		for _, fn := range st {
			if _, ok := ids[fn]; !ok {
				ids[fn] = 0
				fns = append(fns, fn)
			}
		}
	}
	slices.SortFunc(fns, compareFunctions)
	for i, fn := range fns {
		ids[fn] = i
	}
	return ids, fns
}

// callEdges returns the call graph of the stacks: for each function, the
// functions it calls, each once, in order.
func callEdges(stacks [][]function, ids map[function]int, n int) [][]int {
	callees := make([]map[int]bool, n)
	for _, st := range stacks {
		for i := 0; i+1 < len(st); i++ {
			caller, callee := ids[st[i+1]], ids[st[i]]
			if callees[caller] == nil {
				callees[caller] = make(map[int]bool)
			}
			callees[caller][callee] = true
		}
	}
	adj := make([][]int, n)
	for caller, set := range callees {
		for callee := range set {
			adj[caller] = append(adj[caller], callee)
		}
		slices.Sort(adj[caller])
	}
	return adj
}

// stronglyConnected returns the strongly connected component of each node
// of a directed graph, given as lists of successors, and the number of
// components. It is Tarjan's algorithm, one depth-first walk:
//
//  1. Number the nodes in the order the walk reaches them, and push each
//     on a stack when it is reached.
//  2. Give each node a low number: the lowest number it reaches through
//     its descendants in the walk and one more edge to a node still on the
//     stack.
//  3. When the walk is done with a node whose low number is its own, the
//     node is the first of a component reached: pop the stack down to it;
//     the nodes popped are the component.
//
// The recursion is as deep as the longest path of distinct functions
// through the call graph, which is bounded by the deepest stack.
func stronglyConnected(adj [][]int) (comp []int, count int) {
	const unseen = -1
	order := make([]int, len(adj))
	low := make([]int, len(adj))
	onStack := make([]bool, len(adj))
	comp = make([]int, len(adj))
	for i := range order {
		order[i] = unseen
	}
	var stack []int
	next := 0
	var visit func(v int)
	visit = func(v int) {
		// Step 1.
		order[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		// Step 2.
		for _, w := range adj[v] {
			switch {
			case order[w] == unseen:
				visit(w)
				low[v] = min(low[v], low[w])
			case onStack[w]:
				low[v] = min(low[v], order[w])
			}
		}
		// Step 3.
		if low[v] != order[v] {
			return
		}
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			comp[w] = count
			if w == v {
				break
			}
		}
		count++
	}
	for v := range adj {
		if order[v] == unseen {
			visit(v)
		}
	}
	return comp, count
}

// newCallNodes makes a node per component, with the members of those that
// have several functions. The nodes are numbered and named later.
func newCallNodes(fns []function, comp []int, ncomp int) []*CallNode {
	nodes := make([]*CallNode, ncomp)
	size := make([]int, ncomp)
	for _, c := range comp {
		size[c]++
	}
	for i, fn := range fns {
		c := comp[i]
		if nodes[c] == nil {
			nodes[c] = &CallNode{}
		}
		if size[c] == 1 {
			nodes[c].Function, nodes[c].Object = fn.name, fn.object
			continue
		}
		// fns are in order, so the members are too.
		nodes[c].Members = append(nodes[c].Members, CycleMember{Function: fn.name, Object: fn.object})
	}
	return nodes
}

// addStack counts the allocations of site s, whose stack is st, in the
// nodes and arcs.
func addStack(nodes []*CallNode, arcs map[[2]int]*CallArc, st []function, ids map[function]int, comp []int, s *Site) {
	var bySize [SizeCategories]uint64
	for c, n := range s.BySize {
		bySize[c] = n.Bytes
	}
	inner := comp[ids[st[0]]]
	self := nodes[inner]
	self.SelfBytes += s.BytesAllocated
	addSizes(&self.SelfBySize, bySize)
	if len(self.Members) > 0 {
		m := memberOf(self, st[0])
		m.SelfBytes += s.BytesAllocated
		m.Allocations += s.Allocations
		addSizes(&m.SelfBySize, bySize)
	}
	// Walk the runs of frames of one component, from the innermost out.
	callee, run := inner, 1
	for i := 1; i <= len(st); i++ {
		if i < len(st) && comp[ids[st[i]]] == callee {
			run++
			continue
		}
		n := nodes[callee]
		n.TotalBytes += s.BytesAllocated
		n.Recursive += s.Allocations * uint64(run-1)
		if i == len(st) {
			break
		}
		caller := comp[ids[st[i]]]
		n.Called += s.Allocations
		arc := arcs[[2]int{caller, callee}]
		if arc == nil {
			arc = &CallArc{}
			arcs[[2]int{caller, callee}] = arc
		}
		arc.Bytes += s.BytesAllocated
		arc.Calls += s.Allocations
		addSizes(&arc.BySize, bySize)
		callee, run = caller, 1
	}
}

func addSizes(into *[SizeCategories]uint64, sizes [SizeCategories]uint64) {
	for c, n := range sizes {
		into[c] += n
	}
}

func memberOf(n *CallNode, fn function) *CycleMember {
	i, _ := slices.BinarySearchFunc(n.Members, fn, func(m CycleMember, fn function) int {
		return compareFunctions(function{m.Function, m.Object}, fn)
	})
	return &n.Members[i]
}

// orderCallNodes sorts the nodes by bytes with their callees, numbers them
// and their cycles in that order, and hangs the arcs on them.
func orderCallNodes(nodes []*CallNode, arcs map[[2]int]*CallArc) []*CallNode {
	for key, arc := range arcs {
		caller, callee := nodes[key[0]], nodes[key[1]]
		caller.Children = append(caller.Children, CallArc{Node: callee, Bytes: arc.Bytes, BySize: arc.BySize, Calls: arc.Calls})
		callee.Parents = append(callee.Parents, CallArc{Node: caller, Bytes: arc.Bytes, BySize: arc.BySize, Calls: arc.Calls})
	}
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b *CallNode) int {
		// Among nodes of equal totals, those that passed more on to their
		// callees come first: callers before the functions they call.
		return cmp.Or(cmpUint(b.TotalBytes, a.TotalBytes), cmpUint(a.SelfBytes, b.SelfBytes),
			cmpUint(a.Called, b.Called), compareFunctions(firstFunction(a), firstFunction(b)))
	})
	cycles := 0
	for i, n := range sorted {
		n.Index = i + 1
		if len(n.Members) > 0 {
			cycles++
			n.Cycle = cycles
		}
	}
	for _, n := range sorted {
		sortArcs(n.Parents)
		sortArcs(n.Children)
	}
	return sorted
}

// firstFunction returns the function of a node, or the first of its cycle.
func firstFunction(n *CallNode) function {
	if len(n.Members) > 0 {
		return function{n.Members[0].Function, n.Members[0].Object}
	}
	return function{n.Function, n.Object}
}

func sortArcs(arcs []CallArc) {
	slices.SortFunc(arcs, func(a, b CallArc) int {
		return cmp.Or(cmpUint(b.Bytes, a.Bytes), cmpUint(b.Calls, a.Calls), cmp.Compare(a.Node.Index, b.Node.Index))
	})
}
