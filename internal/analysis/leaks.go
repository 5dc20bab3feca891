package analysis

import (
	"cmp"
	"slices"

	"github.com/memtrail/memtrail/internal/trace"
)

// LeakClasses returns how the blocks p still had allocated at its exit
// divide into memcheck's classes — definitely, indirectly and possibly
// lost, still reachable — or, if there is no classification to give, why
// not, which must be true of p: a process scans its memory only when it
// calls exit (the agent hooks exit and _exit), unless recorded with
// memtrail run -leak-check=false; the classes are of the exit, not of the
// end of an earlier window.
func (p *Process) LeakClasses() (*trace.LeakScan, string) {
	switch {
	case p.Ended && p.How == trace.EndSignaled && p.LeakScan != nil:
		// It called exit, and a signal from outside ended it while the
		// scan held it there.
		return nil, "killed by " + trace.Signal(p.Code) + " during the scan at exit"
	case p.Ended && p.How == trace.EndSignaled:
		return nil, "killed by " + trace.Signal(p.Code) + ": no scan at exit"
	case p.Ended && p.How == trace.EndExec:
		return nil, "replaced by exec: no scan at exit"
	case p.Ended && p.How == trace.EndExecUnrecorded:
		return nil, "exec'd without memtrail: no scan at exit"
	case p.Ended && p.How == trace.EndRunning:
		return nil, "still running when recording stopped: no scan at exit"
	case p.Ended && p.How == trace.EndUnknown:
		// The recorder learns an exit from the agent, a wait status or
		// the kernel; none of them: it never called exit, and its
		// parent reaped it before the recorder could see how it ended
		// (a kernel before 6.15 keeps no status for the recorder).
		return nil, "ended without calling exit, how not known (its parent reaped it first): no scan at exit"
	case p.LeakScan == nil && !p.Ended:
		return nil, "the trace has no end of the process: no scan"
	case p.LeakScan == nil:
		return nil, "not scanned (recorded with -leak-check=false)"
	case p.LeakScan.Error != "":
		return nil, "the scan at exit failed: " + p.LeakScan.Error
	case p.Window.To < p.RunTime():
		return nil, "the window ends before the exit, where the scan was"
	}
	return p.LeakScan, ""
}

// LostChain is what the definitely lost blocks allocated from one call
// stack held when the process exited: the blocks themselves and the
// indirectly lost blocks that hang from them (reachable only through
// them). One free of each of those blocks, before their last pointer was
// lost, would have released it all.
type LostChain struct {
	Stack  uint64 // of the definitely lost blocks
	Leads  uint64 // how many definitely lost blocks from Stack
	Bytes  uint64 // of the leads and all that hangs from them
	Blocks uint64
	// Hanging are the indirectly lost blocks, by the stack that allocated
	// them: most bytes first.
	Hanging []ChainPart
	// Origins are where the leaks were made (memtrail run
	// -leak-origins): the frees of blocks that pointed to leads, by the
	// free's call stack, with the leads and what hangs from them that
	// each made unreachable; most bytes first. Leads whose last pointer
	// was not in a freed block are in none.
	Origins []ChainPart
}

// ChainPart is what a chain holds of blocks allocated from one stack, or,
// in LostChain.Origins, made unreachable by frees from one stack.
type ChainPart struct {
	Stack         uint64
	Bytes, Blocks uint64
}

// leakScan takes in the scan of the process at its exit. Its classes
// are of all the blocks the process had: those of a filtered analysis
// count the blocks it keeps alone, which are all still reachable until
// the LeakBlocks records that follow say which are lost.
func (rp *replay) leakScan(scan trace.LeakScan) {
	if rp.opts.filters() && scan.Error == "" {
		scan.DefinitelyLostBytes, scan.DefinitelyLostBlocks = 0, 0
		scan.IndirectlyLostBytes, scan.IndirectlyLostBlocks = 0, 0
		scan.PossiblyLostBytes, scan.PossiblyLostBlocks = 0, 0
		scan.StillReachableBytes, scan.StillReachableBlocks = rp.liveBytes, rp.liveBlocks
		rp.filteredScan = true
	}
	rp.proc.LeakScan = &scan
}

// countLost moves a lost block of a filtered analysis's scan from still
// reachable to its class.
func (rp *replay) countLost(class trace.LeakClass, size uint64) {
	scan := rp.proc.LeakScan
	if !rp.filteredScan || scan == nil {
		return
	}
	var bytes, blocks *uint64
	switch class {
	case trace.DefinitelyLost:
		bytes, blocks = &scan.DefinitelyLostBytes, &scan.DefinitelyLostBlocks
	case trace.IndirectlyLost:
		bytes, blocks = &scan.IndirectlyLostBytes, &scan.IndirectlyLostBlocks
	case trace.PossiblyLost:
		bytes, blocks = &scan.PossiblyLostBytes, &scan.PossiblyLostBlocks
	default:
		return
	}
	*bytes += size
	*blocks++
	scan.StillReachableBytes -= min(size, scan.StillReachableBytes)
	scan.StillReachableBlocks -= min(1, scan.StillReachableBlocks)
}

// leakBlocks takes in the classes of the lost blocks of the scan at the
// process's exit: it makes the chains of the definitely lost blocks. The
// blocks are still live in the replay (the scan comes before the end).
func (rp *replay) leakBlocks(lb *trace.LeakBlocks) {
	if rp.finished {
		return
	}
	p := rp.proc
	stackOf := func(addr uint64) (block, uint64, bool) {
		b, ok := rp.heap.liveAt(addr)
		if !ok || b.site == uncounted {
			return block{}, 0, false
		}
		return b, p.Sites[b.site].Stack, true
	}
	// The chains of this record, by the stack of their leads; an indirect
	// block names its lead by address.
	chains := make(map[uint64]int, len(p.LostChains))
	for i := range p.LostChains {
		chains[p.LostChains[i].Stack] = i
	}
	possible := make(map[uint64]int, len(p.PossiblyLost))
	for i, h := range p.PossiblyLost {
		possible[h.Stack] = i
	}
	chainOf := func(stack uint64) *LostChain {
		i, ok := chains[stack]
		if !ok {
			i = len(p.LostChains)
			chains[stack] = i
			p.LostChains = append(p.LostChains, LostChain{Stack: stack})
		}
		return &p.LostChains[i]
	}
	for _, blk := range lb.Blocks {
		b, stack, ok := stackOf(blk.Addr)
		if !ok {
			continue // a block a filter left out, or a damaged record
		}
		rp.countLost(blk.Class, b.size)
		switch blk.Class {
		case trace.DefinitelyLost:
			c := chainOf(stack)
			c.Leads++
			c.Bytes += b.size
			c.Blocks++
			rp.addToLead(blk.Addr, b.size)
		case trace.PossiblyLost:
			j, ok := possible[stack]
			if !ok {
				j = len(p.PossiblyLost)
				possible[stack] = j
				p.PossiblyLost = append(p.PossiblyLost, ChainPart{Stack: stack})
			}
			p.PossiblyLost[j].Bytes += b.size
			p.PossiblyLost[j].Blocks++
		case trace.IndirectlyLost:
			_, leadStack, ok := stackOf(blk.Leader)
			if !ok {
				continue
			}
			c := chainOf(leadStack)
			c.Bytes += b.size
			c.Blocks++
			rp.addToLead(blk.Leader, b.size)
			j := slices.IndexFunc(c.Hanging, func(h ChainPart) bool { return h.Stack == stack })
			if j < 0 {
				j = len(c.Hanging)
				c.Hanging = append(c.Hanging, ChainPart{Stack: stack})
			}
			c.Hanging[j].Bytes += b.size
			c.Hanging[j].Blocks++
		}
	}
	slices.SortStableFunc(p.LostChains, func(a, b LostChain) int {
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(a.Stack, b.Stack)
	})
	for i := range p.LostChains {
		sortParts(p.LostChains[i].Hanging)
	}
	sortParts(p.PossiblyLost)
}

// sortParts puts the parts with the most bytes first.
func sortParts(parts []ChainPart) {
	slices.SortStableFunc(parts, func(a, b ChainPart) int {
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(a.Stack, b.Stack)
	})
}

// addToLead counts a block of size bytes in what the definitely lost
// block at lead holds (itself included), for leakOrigins.
func (rp *replay) addToLead(lead, size uint64) {
	if rp.leads == nil {
		rp.leads = make(map[uint64]ChainPart)
	}
	t := rp.leads[lead]
	t.Bytes += size
	t.Blocks++
	rp.leads[lead] = t
}

// leakOrigins takes in where the leaks of the scan at exit were made: the
// chain of each lead named gains the free's stack, with what the lead
// holds. It comes after the process's LeakBlocks.
func (rp *replay) leakOrigins(lo *trace.LeakOrigins) {
	if rp.finished {
		return
	}
	p := rp.proc
	p.OriginsLooked = true
	chains := make(map[uint64]int, len(p.LostChains))
	for i, c := range p.LostChains {
		chains[c.Stack] = i
	}
	for _, o := range lo.Origins {
		b, ok := rp.heap.liveAt(o.Addr)
		held, lead := rp.leads[o.Addr]
		if !ok || !lead || b.site == uncounted {
			continue // a block a filter left out, or a damaged record
		}
		i, ok := chains[p.Sites[b.site].Stack]
		if !ok {
			continue
		}
		c := &p.LostChains[i]
		j := slices.IndexFunc(c.Origins, func(part ChainPart) bool { return part.Stack == o.Stack })
		if j < 0 {
			j = len(c.Origins)
			c.Origins = append(c.Origins, ChainPart{Stack: o.Stack})
		}
		c.Origins[j].Bytes += held.Bytes
		c.Origins[j].Blocks += held.Blocks
	}
	for i := range p.LostChains {
		sortParts(p.LostChains[i].Origins)
	}
}
