package analysis_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
)

// graphText writes the nodes of g and their arcs, one node a line:
// "name total=T self=S called=C recursive=R parents=[p:bytes/calls ...]
// children=[...]", with a cycle's members after its name.
func graphText(g *analysis.CallGraph) string {
	var b strings.Builder
	arcs := func(list []analysis.CallArc) string {
		var s []string
		for _, a := range list {
			s = append(s, fmt.Sprintf("%s:%d/%d", a.Node.Name(), a.Bytes, a.Calls))
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	for _, n := range g.Nodes {
		fmt.Fprintf(&b, "[%d] %s", n.Index, n.Name())
		if n.Cycle > 0 {
			var members []string
			for _, m := range n.Members {
				members = append(members, fmt.Sprintf("%s:%d/%d", m.Function, m.SelfBytes, m.Allocations))
			}
			fmt.Fprintf(&b, " {%s}", strings.Join(members, " "))
		}
		fmt.Fprintf(&b, " total=%d self=%d called=%d recursive=%d parents=%s children=%s\n",
			n.TotalBytes, n.SelfBytes, n.Called, n.Recursive, arcs(n.Parents), arcs(n.Children))
	}
	return b.String()
}

func TestCallGraph(t *testing.T) {
	for _, tt := range []struct {
		name   string
		stacks []testStack
		want   string
	}{
		{
			// The widgets of mprof's paper, behind the C runtime's start.
			name: "widgets",
			stacks: []testStack{
				{path: "_start > __libc_start_main > main > make_red_widget > make_widget", sizes: []uint64{204, 204, 204}, kept: 3},
				{path: "_start > __libc_start_main > main > make_blue_widget > make_widget", sizes: []uint64{204, 204}},
			},
			want: `[1] main total=1020 self=0 called=0 recursive=0 parents=[] children=[make_red_widget:612/3 make_blue_widget:408/2]
[2] make_widget total=1020 self=1020 called=5 recursive=0 parents=[make_red_widget:612/3 make_blue_widget:408/2] children=[]
[3] make_red_widget total=612 self=0 called=3 recursive=0 parents=[main:612/3] children=[make_widget:612/3]
[4] make_blue_widget total=408 self=0 called=2 recursive=0 parents=[main:408/2] children=[make_widget:408/2]
`,
		},
		{
			// a > b > a: one node, entered once per stack. An allocation
			// in b under a > b > a > b counts once on main > cycle, and
			// makes 3 calls within the cycle.
			name: "cycle",
			stacks: []testStack{
				{path: "main > a > b > a > b", sizes: []uint64{100}},
				{path: "main > a > b > c", sizes: []uint64{10}},
			},
			want: `[1] main total=110 self=0 called=0 recursive=0 parents=[] children=[<cycle 1>:110/2]
[2] <cycle 1> {a:0/0 b:100/1} total=110 self=100 called=2 recursive=4 parents=[main:110/2] children=[c:10/1]
[3] c total=10 self=10 called=1 recursive=0 parents=[<cycle 1>:10/1] children=[]
`,
		},
		{
			// A function that calls itself is not a cycle; its bytes
			// count once however deep it recursed.
			name: "self-recursion",
			stacks: []testStack{
				{path: "main > walk > walk > walk", sizes: []uint64{48, 48, 48}},
				{path: "main > walk", sizes: []uint64{16}},
			},
			want: `[1] main total=160 self=0 called=0 recursive=0 parents=[] children=[walk:160/4]
[2] walk total=160 self=160 called=4 recursive=6 parents=[main:160/4] children=[]
`,
		},
		{
			// One cycle entered from two callers, through either member,
			// and two cycles numbered in the order of the graph.
			name: "cycle from two callers",
			stacks: []testStack{
				{path: "main > p > a > b > a", sizes: []uint64{300}},
				{path: "main > q > b > a > b", sizes: []uint64{200}},
				{path: "main > q > x > y > x", sizes: []uint64{50}},
			},
			want: `[1] main total=550 self=0 called=0 recursive=0 parents=[] children=[p:300/1 q:250/2]
[2] <cycle 1> {a:300/1 b:200/1} total=500 self=500 called=2 recursive=4 parents=[p:300/1 q:200/1] children=[]
[3] p total=300 self=0 called=1 recursive=0 parents=[main:300/1] children=[<cycle 1>:300/1]
[4] q total=250 self=0 called=2 recursive=0 parents=[main:250/2] children=[<cycle 1>:200/1 <cycle 2>:50/1]
[5] <cycle 2> {x:50/1 y:0/0} total=50 self=50 called=1 recursive=2 parents=[q:50/1] children=[]
`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := stacksProcess(t, tt.stacks)
			if got := graphText(p.CallGraph(allSites(p))); got != tt.want {
				t.Errorf("call graph (-want +got):\n%s", lineDiff(tt.want, got))
			}
		})
	}
}

func TestStronglyConnectedDeep(t *testing.T) {
	// A stack of 3000 distinct functions, the innermost calling back into
	// the outermost's callee: one cycle of 2999 functions.
	var path []string
	path = append(path, "main")
	for i := range 2999 {
		path = append(path, fmt.Sprintf("f%04d", i))
	}
	p := stacksProcess(t, []testStack{
		{path: strings.Join(path, " > "), sizes: []uint64{8}},
		{path: strings.Join(path, " > ") + " > f0000", sizes: []uint64{8}},
	})
	g := p.CallGraph(allSites(p))
	if len(g.Nodes) != 2 || len(g.Nodes[1].Members) != 2999 || g.Nodes[1].TotalBytes != 16 {
		t.Errorf("got %d nodes, the second with %d members and %d bytes; want 2, 2999, 16",
			len(g.Nodes), len(g.Nodes[1].Members), g.Nodes[1].TotalBytes)
	}
}
