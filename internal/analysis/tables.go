package analysis

import (
	"cmp"
	"slices"
	"strings"
)

// This file holds three of the four tables of mprof (Zorn and Hilfinger,
// "A Memory Allocation Profiler for C and Lisp Programs", 1988): the
// allocation bins, the memory leaks and the direct allocations. The fourth,
// the allocation call graph, is in callgraph.go.

// BinRow is a row of mprof's allocation bin table: the allocations of one
// size.
type BinRow struct {
	// Size is the size of the bin's allocations. The last bin, Larger,
	// holds every size above 1024; its Size is 1025.
	Size   uint64
	Larger bool
	Bin
	Types []string // the program's types of that size, if known
}

// BinTable is mprof's allocation bin table.
type BinTable struct {
	Rows  []BinRow // the bins that count anything, by size
	Total Bin
}

// BinTable returns the allocation bin table of p. typeNames returns the
// names of the program's types of a size; nil leaves the types out. The
// bins count every allocation of the process: the model keeps them by
// size, not by call stack, so no stack filter applies to them.
func (p *Process) BinTable(typeNames func(size uint64) []string) BinTable {
	var t BinTable
	for size, b := range p.Bins {
		if b == (Bin{}) {
			continue
		}
		row := BinRow{Size: uint64(size), Larger: size == BinCount-1, Bin: b}
		if typeNames != nil && !row.Larger {
			row.Types = typeNames(row.Size)
		}
		t.Rows = append(t.Rows, row)
		t.Total.Allocations += b.Allocations
		t.Total.Bytes += b.Bytes
		t.Total.Frees += b.Frees
		t.Total.KeptBytes += b.KeptBytes
		t.Total.KeptBlocks += b.KeptBlocks
	}
	return t
}

// DefaultChain is how many functions the partial call chains of the leak
// table have by default, as in mprof.
const DefaultChain = 5

// LeakChain is a row of mprof's memory leak table: the allocations made
// under one partial call chain, of which some blocks were never freed.
type LeakChain struct {
	// Functions are the last callers of the chain's stacks, the allocator's
	// caller last: "main", "make_red_widget", "make_widget".
	Functions []string
	// Truncated says that the stacks go on beyond Functions[0] (mprof
	// writes "..." in front of such chains).
	Truncated   bool
	Allocations uint64
	Bytes       uint64 // allocated
	Frees       uint64
	KeptBytes   uint64 // in use at exit
	KeptBlocks  uint64
}

// LeakTable returns mprof's memory leak table of the sites of p: the
// partial call chains of the last length functions of their stacks (0
// means DefaultChain), each with what the sites that share it allocated,
// for the chains with blocks in use at exit. As mprof counted allocations
// and frees by partial chain, a chain counts the allocations of all its
// sites, those that leaked nothing included. Chains come by bytes in use at
// exit, most first.
func (p *Process) LeakTable(sites []*Site, length int) []LeakChain {
	if length <= 0 {
		length = DefaultChain
	}
	byKey := make(map[string]*LeakChain)
	var chains []*LeakChain
	for _, s := range sites {
		fns, truncated := partialChain(p.programStack(s), length)
		key := strings.Join(fns, "\x00")
		if truncated {
			key = "...\x00" + key
		}
		c, ok := byKey[key]
		if !ok {
			c = &LeakChain{Functions: fns, Truncated: truncated}
			byKey[key] = c
			chains = append(chains, c)
		}
		c.Allocations += s.Allocations
		c.Bytes += s.BytesAllocated
		c.Frees += s.Frees
		c.KeptBytes += s.InUseAtExitBytes
		c.KeptBlocks += s.InUseAtExitBlocks
	}
	var leaks []LeakChain
	for _, c := range chains {
		if c.KeptBlocks > 0 {
			leaks = append(leaks, *c)
		}
	}
	slices.SortFunc(leaks, func(a, b LeakChain) int {
		return cmp.Or(cmpUint(b.KeptBytes, a.KeptBytes), cmpUint(b.KeptBlocks, a.KeptBlocks),
			cmpUint(b.Allocations, a.Allocations), slices.Compare(a.Functions, b.Functions),
			cmpBool(a.Truncated, b.Truncated))
	})
	return leaks
}

// partialChain returns the function names of the innermost length frames,
// outermost first, and whether frames were left out.
func partialChain(frames []Frame, length int) ([]string, bool) {
	n := min(len(frames), length)
	fns := make([]string, n)
	for i, f := range frames[:n] {
		fns[n-1-i] = f.Name()
	}
	return fns, len(frames) > n
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// DirectRow is a row of mprof's direct allocation table: what one function
// allocated by calling the allocator itself.
type DirectRow struct {
	Function    string // Frame.Name of the innermost frame; "" in the total
	Object      string
	Allocations uint64 // mprof's "calls"
	Bytes       uint64
	KeptBytes   uint64 // in use at exit
	KeptBlocks  uint64
	BySize      [SizeCategories]SizeCount
}

// DirectTable is mprof's direct allocation table.
type DirectTable struct {
	Total     DirectRow
	Functions []DirectRow // by bytes allocated, most first
}

// DirectTable returns the direct allocation table of the sites of p: one
// row per function that called the allocator, which is the function of the
// innermost frame (an inlined function, if the call was inlined into
// another).
func (p *Process) DirectTable(sites []*Site) DirectTable {
	var t DirectTable
	rows := make(map[function]*DirectRow)
	for _, s := range sites {
		fn := functionOf(p.programStack(s)[0])
		row, ok := rows[fn]
		if !ok {
			row = &DirectRow{Function: fn.name, Object: fn.object}
			rows[fn] = row
		}
		row.add(s)
		t.Total.add(s)
	}
	for _, row := range rows {
		t.Functions = append(t.Functions, *row)
	}
	slices.SortFunc(t.Functions, func(a, b DirectRow) int {
		return cmp.Or(cmpUint(b.Bytes, a.Bytes), cmpUint(b.KeptBytes, a.KeptBytes),
			cmpUint(b.Allocations, a.Allocations),
			compareFunctions(function{a.Function, a.Object}, function{b.Function, b.Object}))
	})
	return t
}

func (r *DirectRow) add(s *Site) {
	r.Allocations += s.Allocations
	r.Bytes += s.BytesAllocated
	r.KeptBytes += s.InUseAtExitBytes
	r.KeptBlocks += s.InUseAtExitBlocks
	for c, n := range s.BySize {
		r.BySize[c].add(n)
	}
}

func (c *SizeCount) add(n SizeCount) {
	c.Allocations += n.Allocations
	c.Bytes += n.Bytes
	c.KeptBytes += n.KeptBytes
	c.KeptBlocks += n.KeptBlocks
}
