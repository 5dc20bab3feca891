package analysis_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
)

// leakStacks leak from three places that end in m > w; the blue ones free
// all they allocate.
var leakStacks = []testStack{
	{path: "_start > __libc_start_main > main > red > m > w", sizes: []uint64{10, 10, 10}, kept: 2},
	{path: "_start > __libc_start_main > main > blue > m > w", sizes: []uint64{10, 10}},
	{path: "_start > __libc_start_main > main > x > y > red > m > w", sizes: []uint64{20}, kept: 1},
	{path: "_start > __libc_start_main > main > z > x > y > red > m > w", sizes: []uint64{40, 40}, kept: 1},
	{path: "_start > __libc_start_main > main > red > m > v", sizes: []uint64{5}, kept: 1},
}

func leaksText(chains []analysis.LeakChain) string {
	var b strings.Builder
	for _, c := range chains {
		path := strings.Join(c.Functions, " > ")
		if c.Truncated {
			path = "... > " + path
		}
		fmt.Fprintf(&b, "%s: allocs=%d bytes=%d frees=%d kept=%d/%d\n",
			path, c.Allocations, c.Bytes, c.Frees, c.KeptBytes, c.KeptBlocks)
	}
	return b.String()
}

func TestLeakTable(t *testing.T) {
	p := stacksProcess(t, leakStacks)
	for _, tt := range []struct {
		length int
		want   string
	}{
		// All but v merge: blue's allocations count with the chain they
		// share with red's, as mprof counted by chain.
		{1, `... > w: allocs=8 bytes=150 frees=4 kept=80/4
... > v: allocs=1 bytes=5 frees=0 kept=5/1
`},
		{2, `... > m > w: allocs=8 bytes=150 frees=4 kept=80/4
... > m > v: allocs=1 bytes=5 frees=0 kept=5/1
`},
		// The chains stop at main; both stacks through x > y merge.
		{5, `... > x > y > red > m > w: allocs=3 bytes=100 frees=1 kept=60/2
main > red > m > w: allocs=3 bytes=30 frees=1 kept=20/2
main > red > m > v: allocs=1 bytes=5 frees=0 kept=5/1
`},
		{0, `... > x > y > red > m > w: allocs=3 bytes=100 frees=1 kept=60/2
main > red > m > w: allocs=3 bytes=30 frees=1 kept=20/2
main > red > m > v: allocs=1 bytes=5 frees=0 kept=5/1
`},
		{6, `... > z > x > y > red > m > w: allocs=2 bytes=80 frees=1 kept=40/1
main > red > m > w: allocs=3 bytes=30 frees=1 kept=20/2
main > x > y > red > m > w: allocs=1 bytes=20 frees=0 kept=20/1
main > red > m > v: allocs=1 bytes=5 frees=0 kept=5/1
`},
	} {
		got := leaksText(p.LeakTable(allSites(p), tt.length))
		if got != tt.want {
			t.Errorf("chains of %d (-want +got):\n%s", tt.length, lineDiff(tt.want, got))
		}
	}
}

func TestLeakTableNothingKept(t *testing.T) {
	p := stacksProcess(t, []testStack{{path: "main > f", sizes: []uint64{1, 2}}})
	if chains := p.LeakTable(allSites(p), 5); len(chains) != 0 {
		t.Errorf("leak table of a program that freed everything: %v", chains)
	}
}

func TestDirectTable(t *testing.T) {
	p := stacksProcess(t, []testStack{
		{path: "main > f", sizes: []uint64{8, 100}, kept: 1},
		{path: "main > g > f", sizes: []uint64{3000}},
		// The allocator's caller is grow, inlined into insert.
		{path: "main > insert/grow", sizes: []uint64{500, 500, 40}, kept: 2},
		{path: "main", sizes: []uint64{0}, kept: 1},
	})
	tab := p.DirectTable(allSites(p))
	var b strings.Builder
	for _, r := range append([]analysis.DirectRow{tab.Total}, tab.Functions...) {
		fmt.Fprintf(&b, "%q: allocs=%d bytes=%d kept=%d/%d", r.Function, r.Allocations, r.Bytes, r.KeptBytes, r.KeptBlocks)
		for c, n := range r.BySize {
			fmt.Fprintf(&b, " %s=%d/%d/%d", "smlx"[c:c+1], n.Allocations, n.Bytes, n.KeptBytes)
		}
		b.WriteString("\n")
	}
	want := `"": allocs=7 bytes=4148 kept=1008/4 s=2/8/8 m=2/140/0 l=2/1000/1000 x=1/3000/0
"f": allocs=3 bytes=3108 kept=8/1 s=1/8/8 m=1/100/0 l=0/0/0 x=1/3000/0
"grow": allocs=3 bytes=1040 kept=1000/2 s=0/0/0 m=1/40/0 l=2/1000/1000 x=0/0/0
"main": allocs=1 bytes=0 kept=0/1 s=1/0/0 m=0/0/0 l=0/0/0 x=0/0/0
`
	if got := b.String(); got != want {
		t.Errorf("direct table (-want +got):\n%s", lineDiff(want, got))
	}
	s := p.Summary
	if tab.Total.Allocations != s.Allocations || tab.Total.Bytes != s.BytesAllocated ||
		tab.Total.KeptBytes != s.InUseAtExitBytes || tab.Total.KeptBlocks != s.InUseAtExitBlocks {
		t.Errorf("total %+v differs from the summary %+v", tab.Total, s)
	}
}

func TestBinTable(t *testing.T) {
	p := stacksProcess(t, []testStack{
		{path: "main > f", sizes: []uint64{204, 204, 204, 0, 1024, 1025, 5000}, kept: 2},
	})
	types := func(size uint64) []string {
		if size == 204 {
			return []string{"widget"}
		}
		return nil
	}
	tab := p.BinTable(types)
	var b strings.Builder
	for _, r := range tab.Rows {
		fmt.Fprintf(&b, "%d larger=%t allocs=%d bytes=%d frees=%d kept=%d/%d types=%v\n",
			r.Size, r.Larger, r.Allocations, r.Bytes, r.Frees, r.KeptBytes, r.KeptBlocks, r.Types)
	}
	want := `0 larger=false allocs=1 bytes=0 frees=1 kept=0/0 types=[]
204 larger=false allocs=3 bytes=612 frees=1 kept=408/2 types=[widget]
1024 larger=false allocs=1 bytes=1024 frees=1 kept=0/0 types=[]
1025 larger=true allocs=2 bytes=6025 frees=2 kept=0/0 types=[]
`
	if got := b.String(); got != want {
		t.Errorf("bins (-want +got):\n%s", lineDiff(want, got))
	}
	if want := (analysis.Bin{Allocations: 7, Bytes: 7661, Frees: 5, KeptBytes: 408, KeptBlocks: 2}); tab.Total != want {
		t.Errorf("total %+v, want %+v", tab.Total, want)
	}
	if rows := p.BinTable(nil).Rows; rows[1].Types != nil {
		t.Errorf("types %v without a way to name them", rows[1].Types)
	}
}

// Allocations without a call stack still count, under a function of
// their own.
func TestNoCallStack(t *testing.T) {
	p := analyzeText(t, `
info time-unit=1
process id=1 pid=100 exe=/bin/prog args=[prog]
alloc process=1 thread=1 time=1 api=malloc addr=0x1000 size=10 stack=0
process-end id=1 time=2 how=exited
end time=2 events=1
`).Processes[0]
	sites := allSites(p)
	const name = "(no call stack)"
	if rows := p.DirectTable(sites).Functions; len(rows) != 1 || rows[0].Function != name || rows[0].Bytes != 10 {
		t.Errorf("direct table %+v", rows)
	}
	if chains := p.LeakTable(sites, 5); len(chains) != 1 || chains[0].Functions[0] != name {
		t.Errorf("leak table %+v", chains)
	}
	if root := p.TopDown(sites, analysis.CostAllocated); root.Cost != 10 || root.Children[0].Frame.Function != name {
		t.Errorf("top-down tree of %d bytes, first %+v", root.Cost, root.Children)
	}
	if g := p.CallGraph(sites); len(g.Nodes) != 1 || g.Nodes[0].Function != name || g.Nodes[0].SelfBytes != 10 {
		t.Errorf("call graph %+v", g.Nodes)
	}
}
