package analysis_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
)

// randomStacks makes n stacks of a few functions that call each other at
// random, so that there is direct and mutual recursion, inlined frames,
// the C runtime's start above main on some and other threads' stacks
// without main.
func randomStacks(rng *rand.Rand, n int) []testStack {
	fns := []string{"f0", "f1", "f2", "f3", "f4", "f5", "f6"}
	var stacks []testStack
	for range n {
		var path []string
		switch rng.IntN(5) {
		case 0:
			path = append(path, "start_thread")
		case 1:
			path = append(path, "_start", "__libc_start_main", "main")
		default:
			path = append(path, "main")
		}
		// Calls go mostly to the same function or to later ones, so
		// that some functions are in cycles and others are not.
		at := 0
		for range 1 + rng.IntN(6) {
			if rng.IntN(40) == 0 {
				at = rng.IntN(len(fns))
			} else {
				at = min(at+rng.IntN(3), len(fns)-1)
			}
			fn := fns[at]
			if rng.IntN(6) == 0 {
				at = min(at+1, len(fns)-1)
				fn += "/" + fns[at]
			}
			path = append(path, fn)
		}
		st := testStack{path: strings.Join(path, " > ")}
		for range 1 + rng.IntN(3) {
			st.sizes = append(st.sizes, uint64(rng.IntN(5000)))
		}
		st.kept = rng.IntN(len(st.sizes) + 1)
		stacks = append(stacks, st)
	}
	return stacks
}

var costs = []analysis.Cost{analysis.CostAllocations, analysis.CostAllocated, analysis.CostPeak,
	analysis.CostLeaked, analysis.CostTemporary}

// functionStack returns the function names of the stack of s, innermost
// first, up to the outermost main: what the trees and graphs are made of,
// worked out apart from them.
func functionStack(p *analysis.Process, s *analysis.Site) []string {
	var names []string
	for _, f := range p.SiteStack(s) {
		names = append(names, f.Name())
	}
	for i := len(names) - 1; i >= 0; i-- {
		if names[i] == "main" {
			return names[:i+1]
		}
	}
	return names
}

func TestTreesOfRandomStacks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var cycles, recursive int
	for round := range 20 {
		p := stacksProcess(t, randomStacks(rng, 30))
		sites := allSites(p)
		for _, cost := range costs {
			name := fmt.Sprintf("round %d, %s", round, cost)
			want := make(map[string]uint64) // by stack, innermost first
			var total uint64
			for _, s := range sites {
				if c := cost.Of(s); c > 0 {
					want[strings.Join(functionStack(p, s), " < ")] += c
					total += c
				}
			}
			checkTree(t, name+", bottom-up", p.BottomUp(sites, cost), total, want, false)
			checkTree(t, name+", top-down", p.TopDown(sites, cost), total, want, true)
			checkCallersCallees(t, name, p, sites, cost)
		}
		c, r := checkCallGraph(t, fmt.Sprintf("round %d", round), p, sites)
		cycles, recursive = cycles+c, recursive+r
	}
	if cycles == 0 || recursive == 0 {
		t.Errorf("the stacks made %d cycles and %d functions that call themselves: they test too little", cycles, recursive)
	}
}

// checkTree checks that root's cost is the total, that each node's cost
// is its own and its children's, and that the paths to the nodes with a
// cost of their own are the stacks, with their costs.
func checkTree(t *testing.T, name string, root *analysis.TreeNode, total uint64, want map[string]uint64, topDown bool) {
	t.Helper()
	if root.Cost != total || root.Self != 0 {
		t.Errorf("%s: root costs %d (%d itself), want %d (0)", name, root.Cost, root.Self, total)
	}
	got := make(map[string]uint64)
	var walk func(n *analysis.TreeNode, path []string)
	walk = func(n *analysis.TreeNode, path []string) {
		sum := n.Self
		for i, c := range n.Children {
			sum += c.Cost
			if c.Cost == 0 || (i > 0 && c.Cost > n.Children[i-1].Cost) {
				t.Errorf("%s: under %v, child %d costs %d after %d", name, path, i, c.Cost, n.Children[max(i-1, 0)].Cost)
			}
			walk(c, append(slices.Clone(path), c.Frame.Name()))
		}
		if sum != n.Cost {
			t.Errorf("%s: %v costs %d, but itself and its children %d", name, path, n.Cost, sum)
		}
		if n.Self > 0 {
			stack := slices.Clone(path)
			if topDown {
				slices.Reverse(stack)
			}
			got[strings.Join(stack, " < ")] += n.Self
		}
	}
	walk(root, nil)
	if !mapsEqual(got, want) {
		t.Errorf("%s: stacks\n%v\nwant\n%v", name, got, want)
	}
}

func checkCallersCallees(t *testing.T, name string, p *analysis.Process, sites []*analysis.Site, cost analysis.Cost) {
	t.Helper()
	inclusive, self := make(map[string]uint64), make(map[string]uint64)
	arcs := make(map[[2]string]uint64) // by caller and callee
	for _, s := range sites {
		c := cost.Of(s)
		if c == 0 {
			continue
		}
		fns := functionStack(p, s)
		self[fns[0]] += c
		seen := make(map[string]bool)
		seenArc := make(map[[2]string]bool)
		for i, fn := range fns {
			if !seen[fn] {
				seen[fn] = true
				inclusive[fn] += c
			}
			if arc := [2]string{fn, fns[max(i-1, 0)]}; i > 0 && !seenArc[arc] {
				seenArc[arc] = true
				arcs[arc] += c
			}
		}
	}
	gotInclusive, gotSelf := make(map[string]uint64), make(map[string]uint64)
	gotArcs := make(map[[2]string]uint64)
	gotCallers := make(map[[2]string]uint64)
	for _, f := range p.CallersCallees(sites, cost) {
		fn := f.Frame.Name()
		gotInclusive[fn], gotSelf[fn] = f.Inclusive, f.Self
		for _, callee := range f.Callees {
			gotArcs[[2]string{fn, callee.Function}] = callee.Cost
		}
		for _, caller := range f.Callers {
			gotCallers[[2]string{caller.Function, fn}] = caller.Cost
		}
	}
	if !mapsEqual(gotInclusive, inclusive) || !mapsEqual(nonZero(gotSelf), self) {
		t.Errorf("%s: inclusive %v self %v, want %v %v", name, gotInclusive, gotSelf, inclusive, self)
	}
	if !mapsEqual(gotArcs, arcs) || !mapsEqual(gotCallers, arcs) {
		t.Errorf("%s: callees %v callers %v, want %v", name, gotArcs, gotCallers, arcs)
	}
}

// checkCallGraph checks that each node's total is what it allocated and
// passed on to its children, that its calls are those of its parents, that
// the nodes are the strongly connected components of the functions, and
// that the graph of nodes has no cycle. It returns the number of cycles,
// and of functions that call themselves.
func checkCallGraph(t *testing.T, name string, p *analysis.Process, sites []*analysis.Site) (cycles, recursive int) {
	t.Helper()
	g := p.CallGraph(sites)
	if g.Bytes != p.Summary.BytesAllocated || g.Allocations != p.Summary.Allocations {
		t.Errorf("%s: graph of %d bytes in %d allocations, want %d in %d", name, g.Bytes, g.Allocations,
			p.Summary.BytesAllocated, p.Summary.Allocations)
	}
	node := make(map[string]*analysis.CallNode) // by function
	var selfSum uint64
	for i, n := range g.Nodes {
		if n.Index != i+1 || (i > 0 && n.TotalBytes > g.Nodes[i-1].TotalBytes) {
			t.Errorf("%s: node %d is [%d] with %d bytes", name, i, n.Index, n.TotalBytes)
		}
		selfSum += n.SelfBytes
		children, parents, calls := n.SelfBytes, uint64(0), uint64(0)
		for _, a := range n.Children {
			children += a.Bytes
		}
		for _, a := range n.Parents {
			parents += a.Bytes
			calls += a.Calls
			if a.Node == n {
				t.Errorf("%s: %s is its own parent", name, n.Name())
			}
		}
		if children != n.TotalBytes || parents > n.TotalBytes || calls != n.Called {
			t.Errorf("%s: %s has %d bytes, its self and children %d, its parents %d; called %d, by its parents %d",
				name, n.Name(), n.TotalBytes, children, parents, n.Called, calls)
		}
		members := []string{n.Function}
		if n.Cycle == 0 && n.Recursive > 0 {
			recursive++
		}
		if n.Cycle > 0 {
			cycles++
			members = nil
			for _, m := range n.Members {
				members = append(members, m.Function)
			}
			if len(members) < 2 {
				t.Errorf("%s: %s has %d members", name, n.Name(), len(members))
			}
		}
		for _, fn := range members {
			if node[fn] != nil {
				t.Errorf("%s: %s is in two nodes", name, fn)
			}
			node[fn] = n
		}
	}
	if selfSum != g.Bytes {
		t.Errorf("%s: the nodes allocated %d bytes themselves, want %d", name, selfSum, g.Bytes)
	}
	reach := reachable(p, sites)
	for f := range reach {
		for h := range reach {
			strong := reach[f][h] && reach[h][f]
			if same := node[f] == node[h]; f != h && same != strong {
				t.Errorf("%s: %s and %s in one node: %t; call each other: %t", name, f, h, same, strong)
			}
		}
	}
	checkAcyclic(t, name, g)
	return cycles, recursive
}

// reachable returns, for each function on the stacks of sites, the
// functions it reaches through calls, itself included.
func reachable(p *analysis.Process, sites []*analysis.Site) map[string]map[string]bool {
	callees := make(map[string]map[string]bool)
	for _, s := range sites {
		fns := functionStack(p, s)
		for i, fn := range fns {
			if callees[fn] == nil {
				callees[fn] = make(map[string]bool)
			}
			if i > 0 {
				callees[fn][fns[i-1]] = true
			}
		}
	}
	reach := make(map[string]map[string]bool)
	for f := range callees {
		seen := map[string]bool{f: true}
		todo := []string{f}
		for len(todo) > 0 {
			g := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			for h := range callees[g] {
				if !seen[h] {
					seen[h] = true
					todo = append(todo, h)
				}
			}
		}
		reach[f] = seen
	}
	return reach
}

func checkAcyclic(t *testing.T, name string, g *analysis.CallGraph) {
	t.Helper()
	state := make(map[*analysis.CallNode]int) // 1 on the path, 2 done
	var visit func(n *analysis.CallNode) bool
	visit = func(n *analysis.CallNode) bool {
		switch state[n] {
		case 1:
			return false
		case 2:
			return true
		}
		state[n] = 1
		for _, a := range n.Children {
			if !visit(a.Node) {
				return false
			}
		}
		state[n] = 2
		return true
	}
	for _, n := range g.Nodes {
		if !visit(n) {
			t.Errorf("%s: the graph of nodes has a cycle through %s", name, n.Name())
			return
		}
	}
}

func mapsEqual[K comparable](a, b map[K]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func nonZero[K comparable](m map[K]uint64) map[K]uint64 {
	out := make(map[K]uint64)
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// Two frames of a function at different lines make one node, which keeps
// the file but not the line.
func TestTreeMergesByFunction(t *testing.T) {
	const text = `
info time-unit=1
process id=1 pid=100 exe=/src/prog args=[prog] cwd=/src
object id=1 path=/src/prog
module process=1 id=1 object=1 base=0x400000
node process=1 id=1 parent=0 module=1 offset=0x100
node process=1 id=2 parent=1 module=1 offset=0x200
node process=1 id=3 parent=0 module=1 offset=0x110
node process=1 id=4 parent=3 module=1 offset=0x200
alloc process=1 thread=1 time=1 api=malloc addr=0x1000 size=10 stack=2
alloc process=1 thread=1 time=2 api=malloc addr=0x2000 size=30 stack=4
process-end id=1 time=3 how=exited
string id=1 value=main
string id=2 value=prog.c
string id=3 value=f
symbol object=1 offset=0x100 frames=1:2:10
symbol object=1 offset=0x110 frames=1:2:11
symbol object=1 offset=0x200 frames=3:2:20
end time=3 events=2
`
	p := analyzeText(t, text).Processes[0]
	root := p.TopDown(allSites(p), analysis.CostAllocated)
	if len(root.Children) != 1 || len(root.Children[0].Children) != 1 {
		t.Fatalf("tree has %d roots", len(root.Children))
	}
	main, f := root.Children[0], root.Children[0].Children[0]
	if main.Frame.Function != "main" || main.Frame.File != "prog.c" || main.Frame.Line != 0 || main.Cost != 40 {
		t.Errorf("main is %+v costing %d", main.Frame, main.Cost)
	}
	if f.Frame.Function != "f" || f.Frame.Line != 20 || f.Cost != 40 || f.Self != 40 {
		t.Errorf("f is %+v costing %d (%d itself)", f.Frame, f.Cost, f.Self)
	}
}
