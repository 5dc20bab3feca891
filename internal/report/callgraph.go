package report

import (
	"fmt"

	"github.com/memtrail/memtrail/internal/analysis"
)

// callGraph writes mprof's allocation call graph in gprof's layout: an
// entry per function (or cycle of functions), its callers above it, its
// callees below.
func (t *textReport) callGraph() {
	g := t.p.CallGraph(t.sites())
	t.printf("\nAllocation call graph, by bytes allocated by each function and its callees%s\n",
		t.limitNote(len(g.Nodes), "functions"))
	t.filterNote()
	if len(g.Nodes) == 0 {
		t.printf("  none\n")
		return
	}
	t.printf("  Callers are above each function, callees below, with the bytes allocated under the call and\n" +
		"  their share of the function's. s m l x: the bytes of sizes up to 32, 256, 2048 and above, in %%.\n" +
		"  called: the calls to the function that led to allocations, +recursive ones.\n\n")
	rows := [][]string{{"index", "self+desc", "%", "self", "%", "s", "m", "l", "x", "called", "name"}}
	for i, n := range g.Nodes[:min(len(g.Nodes), t.opts.top())] {
		if i > 0 {
			rows = append(rows, make([]string, len(rows[0])))
		}
		rows = append(rows, callEntryRows(n, g)...)
	}
	right := []bool{false, true, true, true, true, true, true, true, true, true, false}
	t.table(rows, right)
}

// callEntryRows returns the rows of a function's entry in the call graph.
func callEntryRows(n *analysis.CallNode, g *analysis.CallGraph) [][]string {
	var rows [][]string
	for _, a := range n.Parents {
		rows = append(rows, arcCells(a, n, fmt.Sprintf("%s/%s", Count(a.Calls), Count(n.Called))))
	}
	called := Count(n.Called)
	if n.Recursive > 0 {
		called += "+" + Count(n.Recursive)
	}
	entry := []string{fmt.Sprintf("[%d]", n.Index), Size(n.TotalBytes), percent(n.TotalBytes, g.Bytes),
		Size(n.SelfBytes), percent(n.SelfBytes, n.TotalBytes)}
	entry = append(entry, sizeShares(n.SelfBySize, n.SelfBytes)...)
	rows = append(rows, append(entry, called, fmt.Sprintf("%s [%d]", Printable(n.Name()), n.Index)))
	for _, m := range n.Members {
		member := []string{"", "", "", Size(m.SelfBytes), percent(m.SelfBytes, n.TotalBytes)}
		member = append(member, sizeShares(m.SelfBySize, m.SelfBytes)...)
		rows = append(rows, append(member, "", fmt.Sprintf("    %s %s", Printable(m.Function), Printable(n.Name()))))
	}
	for _, a := range n.Children {
		rows = append(rows, arcCells(a, n, fmt.Sprintf("%s/%s", Count(a.Calls), Count(a.Node.Called))))
	}
	return rows
}

// arcCells returns the row of a caller or callee of n.
func arcCells(a analysis.CallArc, n *analysis.CallNode, calls string) []string {
	cells := []string{"", Size(a.Bytes), percent(a.Bytes, n.TotalBytes), "", ""}
	cells = append(cells, sizeShares(a.BySize, a.Bytes)...)
	return append(cells, calls, fmt.Sprintf("    %s [%d]", Printable(a.Node.Name()), a.Node.Index))
}

func sizeShares(by [analysis.SizeCategories]uint64, whole uint64) []string {
	cells := make([]string, len(by))
	for c, n := range by {
		cells[c] = sizeShare(n, whole)
	}
	return cells
}

type jsonCallGraph struct {
	Bytes       uint64         `json:"bytes"` // allocated on all the stacks
	Allocations uint64         `json:"allocations"`
	Nodes       []jsonCallNode `json:"nodes"` // all of them, by total_bytes, most first
}

type jsonCallNode struct {
	Index          int               `json:"index"`
	Name           string            `json:"name"`     // the function, or "<cycle N>"
	Function       string            `json:"function"` // "" for a cycle
	Object         string            `json:"object"`
	Cycle          int               `json:"cycle"`   // 0 if the node is a single function
	Members        []jsonCycleMember `json:"members"` // of a cycle
	SelfBytes      uint64            `json:"self_bytes"`
	SelfBySize     jsonByteSizes     `json:"self_by_size"`
	TotalBytes     uint64            `json:"total_bytes"` // self and descendants
	Called         uint64            `json:"called"`
	RecursiveCalls uint64            `json:"recursive_calls"`
	Parents        []jsonCallArc     `json:"parents"`
	Children       []jsonCallArc     `json:"children"`
}

type jsonCycleMember struct {
	Function    string        `json:"function"`
	Object      string        `json:"object"`
	SelfBytes   uint64        `json:"self_bytes"`
	SelfBySize  jsonByteSizes `json:"self_by_size"`
	Allocations uint64        `json:"allocations"`
}

// jsonCallArc is a caller or callee of a node: the index and name of the
// node at the other end, and what the allocations under the call add up to.
type jsonCallArc struct {
	Index  int           `json:"index"`
	Name   string        `json:"name"`
	Bytes  uint64        `json:"bytes"`
	BySize jsonByteSizes `json:"by_size"`
	Calls  uint64        `json:"calls"`
}

// jsonByteSizes breaks bytes down by mprof's size categories.
type jsonByteSizes struct {
	Small      uint64 `json:"small"`
	Medium     uint64 `json:"medium"`
	Large      uint64 `json:"large"`
	ExtraLarge uint64 `json:"extra_large"`
}

func jsonByteSizesOf(by [analysis.SizeCategories]uint64) jsonByteSizes {
	return jsonByteSizes{Small: by[analysis.Small], Medium: by[analysis.Medium], Large: by[analysis.Large],
		ExtraLarge: by[analysis.ExtraLarge]}
}

func jsonCallGraphOf(c *viewContext) any {
	g := c.p.CallGraph(c.sites())
	j := jsonCallGraph{Bytes: g.Bytes, Allocations: g.Allocations, Nodes: make([]jsonCallNode, 0, len(g.Nodes))}
	for _, n := range g.Nodes {
		node := jsonCallNode{
			Index: n.Index, Name: n.Name(), Function: n.Function, Object: n.Object, Cycle: n.Cycle,
			Members:   make([]jsonCycleMember, 0, len(n.Members)),
			SelfBytes: n.SelfBytes, SelfBySize: jsonByteSizesOf(n.SelfBySize), TotalBytes: n.TotalBytes,
			Called: n.Called, RecursiveCalls: n.Recursive,
			Parents: jsonCallArcs(n.Parents), Children: jsonCallArcs(n.Children),
		}
		for _, m := range n.Members {
			node.Members = append(node.Members, jsonCycleMember{Function: m.Function, Object: m.Object,
				SelfBytes: m.SelfBytes, SelfBySize: jsonByteSizesOf(m.SelfBySize), Allocations: m.Allocations})
		}
		j.Nodes = append(j.Nodes, node)
	}
	return j
}

func jsonCallArcs(arcs []analysis.CallArc) []jsonCallArc {
	list := make([]jsonCallArc, 0, len(arcs))
	for _, a := range arcs {
		list = append(list, jsonCallArc{Index: a.Node.Index, Name: a.Node.Name(), Bytes: a.Bytes,
			BySize: jsonByteSizesOf(a.BySize), Calls: a.Calls})
	}
	return list
}
