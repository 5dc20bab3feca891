package report

import (
	"fmt"
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
)

// This file renders heaptrack's views of call stacks weighed by one of
// its costs (Options.Cost): the top-down and bottom-up trees, and the
// callers and callees of each function.

// costTitles say what each cost measures, for titles.
var costTitles = map[analysis.Cost]string{
	analysis.CostAllocations: "allocations",
	analysis.CostAllocated:   "bytes allocated",
	analysis.CostPeak:        "bytes live at the peak",
	analysis.CostLeaked:      "bytes in use at exit",
	analysis.CostTemporary:   "temporary allocations",
}

// costText writes an amount of cost c: a size or a count.
func costText(c analysis.Cost, n uint64) string {
	if c.IsBytes() {
		return Size(n)
	}
	return Count(n)
}

func (t *textReport) topDown() {
	t.tree("Top-down call tree", "from main to the functions that called the allocator",
		t.p.TopDown(t.sites(), t.opts.Cost))
}

func (t *textReport) bottomUp() {
	t.tree("Bottom-up call tree", "from the functions that called the allocator to their callers",
		t.p.BottomUp(t.sites(), t.opts.Cost))
}

// tree writes a tree of call stacks, a node a line, indented by depth.
// Each node shows the opts.top() children that cost most, down to
// opts.frames() levels.
func (t *textReport) tree(title, about string, root *analysis.TreeNode) {
	cost := t.opts.Cost
	t.printf("\n%s, %s: %s in all\n  %s\n", title, costTitles[cost], costText(cost, root.Cost), about)
	t.filterNote()
	if len(root.Children) == 0 {
		t.printf("  none\n")
		return
	}
	rows := [][]string{{costTitles[cost], "%", "function"}}
	var walk func(n *analysis.TreeNode, depth int)
	walk = func(n *analysis.TreeNode, depth int) {
		indent := strings.Repeat("  ", depth)
		if depth == t.opts.frames() {
			rows = append(rows, []string{"", "", indent + "..."})
			return
		}
		shown := n.Children[:min(len(n.Children), t.opts.top())]
		for _, c := range shown {
			rows = append(rows, []string{costText(cost, c.Cost), percent(c.Cost, root.Cost), indent + t.frameLine(c.Frame)})
			if len(c.Children) > 0 {
				walk(c, depth+1)
			}
		}
		if rest := n.Children[len(shown):]; len(rest) > 0 {
			var restCost uint64
			for _, c := range rest {
				restCost += c.Cost
			}
			rows = append(rows, []string{costText(cost, restCost), percent(restCost, root.Cost),
				fmt.Sprintf("%s... %s", indent, othersText(len(rest)))})
		}
	}
	walk(root, 0)
	t.table(rows, []bool{true, true, false})
}

// treeThreshold is the least share of the whole cost a node of a JSON tree
// must have to be listed: 0.1%. The cost of the children left out is
// given in their parent's omitted_cost, so that the costs still add up.
const treeThreshold = 1000

type jsonTree struct {
	Cost string `json:"cost"` // allocations, allocated, peak, leaked or temporary
	// Total is the cost of all the stacks of the tree.
	Total uint64 `json:"total"`
	// Threshold is the least cost of a node listed: 0.1% of the total,
	// at least 1.
	Threshold uint64 `json:"threshold"`
	jsonTreeChildren
}

// jsonTreeNode is a function of a tree. Its frame has the file, line and
// address of the frames merged into it if they all have the same, else ""
// and 0.
type jsonTreeNode struct {
	jsonFrame
	Cost uint64 `json:"cost"` // of the stacks through the node
	Self uint64 `json:"self"` // of the stacks that end at the node
	jsonTreeChildren
}

type jsonTreeChildren struct {
	Children        []jsonTreeNode `json:"children"` // those that cost at least the threshold, most first
	OmittedChildren int            `json:"omitted_children"`
	OmittedCost     uint64         `json:"omitted_cost"`
}

func jsonTopDownOf(c *viewContext) any {
	return jsonTreeOf(c.p.TopDown(c.sites(), c.opts.Cost), c.opts.Cost)
}

func jsonBottomUpOf(c *viewContext) any {
	return jsonTreeOf(c.p.BottomUp(c.sites(), c.opts.Cost), c.opts.Cost)
}

func jsonTreeOf(root *analysis.TreeNode, cost analysis.Cost) jsonTree {
	threshold := max(root.Cost/treeThreshold, 1)
	return jsonTree{Cost: cost.String(), Total: root.Cost, Threshold: threshold,
		jsonTreeChildren: jsonChildren(root, threshold)}
}

func jsonChildren(n *analysis.TreeNode, threshold uint64) jsonTreeChildren {
	j := jsonTreeChildren{Children: []jsonTreeNode{}}
	for _, c := range n.Children {
		if c.Cost < threshold {
			j.OmittedChildren++
			j.OmittedCost += c.Cost
			continue
		}
		j.Children = append(j.Children, jsonTreeNode{jsonFrame: jsonFrames([]analysis.Frame{c.Frame})[0],
			Cost: c.Cost, Self: c.Self, jsonTreeChildren: jsonChildren(c, threshold)})
	}
	return j
}

func (t *textReport) callers() {
	cost, sites := t.opts.Cost, t.sites()
	fns := t.p.CallersCallees(sites, cost)
	total := totalCost(sites, cost)
	t.printf("\nCallers and callees, %s: %s in all%s\n", costTitles[cost], costText(cost, total),
		t.limitNote(len(fns), "functions"))
	t.filterNote()
	if len(fns) == 0 {
		t.printf("  none\n")
		return
	}
	t.printf("  %% is of all; a caller's or callee's cost is that of the stacks through both\n")
	rows := [][]string{{"inclusive", "%", "self", "%", "function"}}
	for i, f := range fns[:min(len(fns), t.opts.top())] {
		if i > 0 {
			rows = append(rows, make([]string, len(rows[0])))
		}
		rows = append(rows, []string{costText(cost, f.Inclusive), percent(f.Inclusive, total),
			costText(cost, f.Self), percent(f.Self, total), t.frameLine(f.Frame)})
		rows = t.shareRows(rows, "called from", f.Callers, total)
		rows = t.shareRows(rows, "calls", f.Callees, total)
	}
	t.table(rows, []bool{true, true, true, true, false})
}

// shareRows appends a row for each of the opts.top() callers or callees
// that cost most.
func (t *textReport) shareRows(rows [][]string, label string, list []analysis.FunctionShare, total uint64) [][]string {
	cost := t.opts.Cost
	shown := list[:min(len(list), t.opts.top())]
	for _, s := range shown {
		rows = append(rows, []string{costText(cost, s.Cost), percent(s.Cost, total), "", "",
			fmt.Sprintf("  %s %s", label, Printable(s.Function))})
	}
	if rest := list[len(shown):]; len(rest) > 0 {
		var restCost uint64
		for _, s := range rest {
			restCost += s.Cost
		}
		rows = append(rows, []string{costText(cost, restCost), percent(restCost, total), "", "",
			fmt.Sprintf("  %s %s", label, othersText(len(rest)))})
	}
	return rows
}

type jsonCallers struct {
	Cost      string             `json:"cost"`
	Total     uint64             `json:"total"`     // the cost of all the stacks
	Functions []jsonFunctionCost `json:"functions"` // all of them, most inclusive cost first
}

type jsonFunctionCost struct {
	jsonFrame                     // with the file and line only if all its frames have the same
	Inclusive uint64              `json:"inclusive"`
	Self      uint64              `json:"self"`
	Callers   []jsonFunctionShare `json:"callers"`
	Callees   []jsonFunctionShare `json:"callees"`
}

type jsonFunctionShare struct {
	Function string `json:"function"`
	Object   string `json:"object"`
	Cost     uint64 `json:"cost"`
}

func jsonCallersOf(c *viewContext) any {
	cost := c.opts.Cost
	sites := c.sites()
	fns := c.p.CallersCallees(sites, cost)
	j := jsonCallers{Cost: cost.String(), Total: totalCost(sites, cost), Functions: make([]jsonFunctionCost, 0, len(fns))}
	for _, f := range fns {
		j.Functions = append(j.Functions, jsonFunctionCost{jsonFrame: jsonFrames([]analysis.Frame{f.Frame})[0],
			Inclusive: f.Inclusive, Self: f.Self, Callers: jsonShares(f.Callers), Callees: jsonShares(f.Callees)})
	}
	return j
}

func jsonShares(list []analysis.FunctionShare) []jsonFunctionShare {
	out := make([]jsonFunctionShare, 0, len(list))
	for _, s := range list {
		out = append(out, jsonFunctionShare{Function: s.Function, Object: s.Object, Cost: s.Cost})
	}
	return out
}

// othersText writes how many others there are: "1 other", "3 others".
func othersText(n int) string {
	if n == 1 {
		return "1 other"
	}
	return fmt.Sprintf("%d others", n)
}

func totalCost(sites []*analysis.Site, cost analysis.Cost) uint64 {
	var total uint64
	for _, s := range sites {
		total += cost.Of(s)
	}
	return total
}
