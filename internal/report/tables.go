package report

import (
	"fmt"
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
)

// This file renders mprof's four tables (Zorn and Hilfinger, 1988): the
// memory leaks, the allocation bins, the direct allocations and the
// allocation call graph.

// sites returns the sites of the process: those of the call stacks the
// analysis's filter passed, if it had one.
func (c *viewContext) sites() []*analysis.Site { return c.p.SiteList() }

func (t *textReport) sites() []*analysis.Site { return t.p.SiteList() }

// filterNote says which call stacks the analysis kept, if not all.
func (t *textReport) filterNote() {
	var parts []string
	for _, f := range t.m.Filter().Fields() {
		parts = append(parts, fmt.Sprintf("-%s %s", f.Name, shellQuote(f.Expr.String())))
	}
	if len(parts) > 0 {
		t.printf("  only the blocks allocated from the call stacks that pass %s\n", strings.Join(parts, " "))
	}
}

// limitNote writes ", top N of M noun" to a title if it lists only some.
func (t *textReport) limitNote(total int, noun string) string {
	if total <= t.opts.top() {
		return ""
	}
	return fmt.Sprintf(", top %d of %d %s", t.opts.top(), total, noun)
}

// typeNames returns how the bin table names the types of a size: the
// program's types of that size, from its DWARF.
func typeNames(p *analysis.Process) func(size uint64) []string { return p.TypeNames }

func (t *textReport) leaks() {
	chains := t.p.LeakTable(t.sites(), t.opts.chain())
	by := fmt.Sprintf("the last %d functions of their call stacks", t.opts.chain())
	if t.opts.chain() == 1 {
		by = "the function that called the allocator"
	}
	t.printf("\nMemory leaks: blocks never freed, by %s%s\n", by, t.limitNote(len(chains), "chains"))
	t.filterNote()
	if len(chains) == 0 {
		t.printf("  none\n")
		return
	}
	var keptBytes uint64
	for _, c := range chains {
		keptBytes += c.KeptBytes
	}
	rows := [][]string{{"allocs", "bytes", "frees", "kept", "%", "blocks", "chain"}}
	for _, c := range chains[:min(len(chains), t.opts.top())] {
		rows = append(rows, []string{Count(c.Allocations), Size(c.Bytes), Count(c.Frees), Size(c.KeptBytes),
			percent(c.KeptBytes, keptBytes), Count(c.KeptBlocks), chainText(c)})
	}
	t.table(rows, []bool{true, true, true, true, true, true, false})
}

// chainText writes a partial call chain as mprof does: "main > f > g", or
// "... > f > g" if the stacks go on.
func chainText(c analysis.LeakChain) string {
	s := Printable(strings.Join(c.Functions, " > "))
	if c.Truncated {
		s = "... > " + s
	}
	return s
}

type jsonLeaks struct {
	ChainLength int             `json:"chain_length"`
	KeptBytes   uint64          `json:"kept_bytes"` // of all the chains
	KeptBlocks  uint64          `json:"kept_blocks"`
	Chains      []jsonLeakChain `json:"chains"` // all of them, most bytes kept first
}

type jsonLeakChain struct {
	Functions   []string `json:"functions"` // outermost first, the allocator's caller last
	Truncated   bool     `json:"truncated"` // the stacks go on beyond the first function
	Allocations uint64   `json:"allocations"`
	Bytes       uint64   `json:"bytes"`
	Frees       uint64   `json:"frees"`
	KeptBytes   uint64   `json:"kept_bytes"`
	KeptBlocks  uint64   `json:"kept_blocks"`
}

func jsonLeaksOf(c *viewContext) any {
	chains := c.p.LeakTable(c.sites(), c.opts.chain())
	j := jsonLeaks{ChainLength: c.opts.chain(), Chains: make([]jsonLeakChain, 0, len(chains))}
	for _, ch := range chains {
		j.KeptBytes += ch.KeptBytes
		j.KeptBlocks += ch.KeptBlocks
		j.Chains = append(j.Chains, jsonLeakChain{
			Functions: ch.Functions, Truncated: ch.Truncated, Allocations: ch.Allocations, Bytes: ch.Bytes,
			Frees: ch.Frees, KeptBytes: ch.KeptBytes, KeptBlocks: ch.KeptBlocks,
		})
	}
	return j
}

// minBinShare is the share of the allocations, bytes or bytes kept that a
// bin must hold for the text to list it, as mprof's "normal" verbosity
// lists only the bins that hold "a reasonable fraction". JSON has them
// all.
const minBinShare = 0.01

func (t *textReport) bins() {
	tab := t.p.BinTable(typeNames(t.p))
	t.printf("\nAllocation bins, by size\n")
	t.filterNote()
	if len(tab.Rows) == 0 {
		t.printf("  none\n")
		return
	}
	rows := [][]string{{"size", "allocs", "bytes", "%", "frees", "kept", "%", "types"}}
	var left analysis.Bin
	var leftSizes int
	for _, r := range tab.Rows {
		if !holdsShare(r.Bin, tab.Total) {
			left = addBin(left, r.Bin)
			leftSizes++
			continue
		}
		size := Count(r.Size)
		if r.Larger {
			size = "> 1024"
		}
		rows = append(rows, binCells(size, r.Bin, tab.Total, Printable(strings.Join(r.Types, ", "))))
	}
	if leftSizes > 0 {
		rows = append(rows, binCells(fmt.Sprintf("%d others", leftSizes), left, tab.Total, "(each under 1%)"))
	}
	total := binCells("total", tab.Total, tab.Total, "")
	total[3], total[6] = "", ""
	rows = append(rows, total)
	t.table(rows, []bool{true, true, true, true, true, true, true, false})
}

func binCells(size string, b, total analysis.Bin, types string) []string {
	return []string{size, Count(b.Allocations), Size(b.Bytes), percent(b.Bytes, total.Bytes), Count(b.Frees),
		Size(b.KeptBytes), percent(b.KeptBytes, total.KeptBytes), types}
}

func holdsShare(b, total analysis.Bin) bool {
	share := func(part, whole uint64) bool { return whole > 0 && float64(part) >= minBinShare*float64(whole) }
	return share(b.Allocations, total.Allocations) || share(b.Bytes, total.Bytes) || share(b.KeptBytes, total.KeptBytes)
}

func addBin(a, b analysis.Bin) analysis.Bin {
	return analysis.Bin{Allocations: a.Allocations + b.Allocations, Bytes: a.Bytes + b.Bytes, Frees: a.Frees + b.Frees,
		KeptBytes: a.KeptBytes + b.KeptBytes, KeptBlocks: a.KeptBlocks + b.KeptBlocks}
}

type jsonBins struct {
	// Filtered says that the analysis kept only the blocks of the call
	// stacks a filter passed, and the bins count those alone.
	Filtered bool          `json:"filtered"`
	Total    jsonBinCounts `json:"total"`
	Bins     []jsonBin     `json:"bins"` // every bin that counts anything, by size
}

type jsonBin struct {
	Size   uint64 `json:"size"`   // 1025 for the bin of all sizes above 1024
	Larger bool   `json:"larger"` // the bin of all sizes above 1024
	jsonBinCounts
	Types []string `json:"types"`
}

type jsonBinCounts struct {
	Allocations uint64 `json:"allocations"`
	Bytes       uint64 `json:"bytes"`
	Frees       uint64 `json:"frees"`
	KeptBytes   uint64 `json:"kept_bytes"`
	KeptBlocks  uint64 `json:"kept_blocks"`
}

func jsonBinCountsOf(b analysis.Bin) jsonBinCounts {
	return jsonBinCounts{Allocations: b.Allocations, Bytes: b.Bytes, Frees: b.Frees, KeptBytes: b.KeptBytes, KeptBlocks: b.KeptBlocks}
}

func jsonBinsOf(c *viewContext) any {
	tab := c.p.BinTable(typeNames(c.p))
	j := jsonBins{Filtered: !c.m.Filter().IsZero(), Total: jsonBinCountsOf(tab.Total), Bins: make([]jsonBin, 0, len(tab.Rows))}
	for _, r := range tab.Rows {
		j.Bins = append(j.Bins, jsonBin{Size: r.Size, Larger: r.Larger, jsonBinCounts: jsonBinCountsOf(r.Bin), Types: orEmpty(r.Types)})
	}
	return j
}

func (t *textReport) direct() {
	tab := t.p.DirectTable(t.sites())
	t.printf("\nDirect allocation: the functions that called the allocator%s\n", t.limitNote(len(tab.Functions), "functions"))
	t.filterNote()
	if len(tab.Functions) == 0 {
		t.printf("  none\n")
		return
	}
	t.printf("  s m l x: the bytes of sizes up to 32, 256, 2048 and above, in %% of all bytes (and of all kept)\n")
	rows := [][]string{{"bytes", "%", "s", "m", "l", "x", "kept", "%", "s", "m", "l", "x", "calls", "function"}}
	rows = append(rows, directCells(tab.Total, tab.Total, "<total>"))
	for _, r := range tab.Functions[:min(len(tab.Functions), t.opts.top())] {
		rows = append(rows, directCells(r, tab.Total, Printable(r.Function)))
	}
	right := []bool{true, true, true, true, true, true, true, true, true, true, true, true, true, false}
	t.table(rows, right)
}

func directCells(r, total analysis.DirectRow, name string) []string {
	cells := []string{Size(r.Bytes), percent(r.Bytes, total.Bytes)}
	for _, n := range r.BySize {
		cells = append(cells, sizeShare(n.Bytes, total.Bytes))
	}
	cells = append(cells, Size(r.KeptBytes), percent(r.KeptBytes, total.KeptBytes))
	for _, n := range r.BySize {
		cells = append(cells, sizeShare(n.KeptBytes, total.KeptBytes))
	}
	return append(cells, Count(r.Allocations), name)
}

// sizeShare writes part in percent of whole for mprof's size breakdowns:
// a whole number, blank for nothing, "<1" for a trace.
func sizeShare(part, whole uint64) string {
	switch {
	case part == 0 || whole == 0:
		return ""
	case 100*part < whole:
		return "<1"
	}
	return fmt.Sprintf("%.0f", 100*float64(part)/float64(whole))
}

type jsonDirect struct {
	Total     jsonDirectRow   `json:"total"`     // its function and object are ""
	Functions []jsonDirectRow `json:"functions"` // all of them, most bytes first
}

type jsonDirectRow struct {
	Function    string    `json:"function"`
	Object      string    `json:"object"`
	Allocations uint64    `json:"allocations"`
	Bytes       uint64    `json:"bytes"`
	KeptBytes   uint64    `json:"kept_bytes"`
	KeptBlocks  uint64    `json:"kept_blocks"`
	BySize      jsonSizes `json:"by_size"`
}

// jsonSizes breaks counts down by mprof's size categories: up to 32
// bytes, 256, 2048, and more.
type jsonSizes struct {
	Small      jsonSizeCount `json:"small"`
	Medium     jsonSizeCount `json:"medium"`
	Large      jsonSizeCount `json:"large"`
	ExtraLarge jsonSizeCount `json:"extra_large"`
}

type jsonSizeCount struct {
	Allocations uint64 `json:"allocations"`
	Bytes       uint64 `json:"bytes"`
	KeptBytes   uint64 `json:"kept_bytes"`
	KeptBlocks  uint64 `json:"kept_blocks"`
}

func jsonSizesOf(by [analysis.SizeCategories]analysis.SizeCount) jsonSizes {
	c := func(n analysis.SizeCount) jsonSizeCount {
		return jsonSizeCount{Allocations: n.Allocations, Bytes: n.Bytes, KeptBytes: n.KeptBytes, KeptBlocks: n.KeptBlocks}
	}
	return jsonSizes{Small: c(by[analysis.Small]), Medium: c(by[analysis.Medium]), Large: c(by[analysis.Large]),
		ExtraLarge: c(by[analysis.ExtraLarge])}
}

func jsonDirectRowOf(r analysis.DirectRow) jsonDirectRow {
	return jsonDirectRow{Function: r.Function, Object: r.Object, Allocations: r.Allocations, Bytes: r.Bytes,
		KeptBytes: r.KeptBytes, KeptBlocks: r.KeptBlocks, BySize: jsonSizesOf(r.BySize)}
}

func jsonDirectOf(c *viewContext) any {
	tab := c.p.DirectTable(c.sites())
	j := jsonDirect{Total: jsonDirectRowOf(tab.Total), Functions: make([]jsonDirectRow, 0, len(tab.Functions))}
	for _, r := range tab.Functions {
		j.Functions = append(j.Functions, jsonDirectRowOf(r))
	}
	return j
}
