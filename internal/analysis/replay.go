package analysis

import (
	"slices"

	"github.com/memtrail/memtrail/internal/trace"
)

// replay is the state of one process while its events are replayed.
type replay struct {
	proc     *Process
	started  bool   // its start record was read
	finished bool   // its end record was read, and its replay state dropped
	late     uint64 // events that came after its end, ignored
	// forkOnly says that all the trace has of the process so far is the
	// Fork record of its parent, forkedBy.
	forkOnly bool
	forkedBy uint64

	live       addrMap[block]   // the blocks live now, by address
	siteOf     map[uint64]int32 // index in proc.Sites by stack ID
	liveBytes  uint64
	liveBlocks uint64

	// epoch counts the peaks reached so far: every time the live bytes
	// exceed the peak, the peak moves and the epoch goes up. See touch.
	epoch uint64

	// lastAlloc is the address of the latest allocation. A free of it is
	// the free of a temporary allocation: no other allocation came between.
	lastAlloc uint64

	freed    freedBlocks
	problems map[problemKey]int // index in proc.Problems

	lastTime  uint64 // of the latest event
	lostSum   uint64 // of the process's lost records
	lostAtEnd uint64 // as its end record says
}

// block is a live block. It holds no pointer, so that the garbage collector
// need not scan the map of live blocks, by far the largest thing here.
type block struct {
	size uint64
	site int32 // index in proc.Sites
	api  trace.API
}

func newReplay(p *Process) *replay {
	return &replay{
		proc:     p,
		siteOf:   make(map[uint64]int32),
		problems: make(map[problemKey]int),
	}
}

func (rp *replay) event(e *trace.Event) {
	if rp.finished {
		rp.late++
		return
	}
	rp.lastTime = max(rp.lastTime, e.Time)
	switch e.Kind {
	case trace.KindAlloc:
		rp.alloc(e.Addr, e.Size, e.API, e.Stack, e.Time)
	case trace.KindFree:
		rp.free(e)
	case trace.KindRealloc:
		rp.realloc(e)
	}
}

// alloc adds a block of size bytes at addr, allocated from stack.
func (rp *replay) alloc(addr, size uint64, api trace.API, stack, time uint64) {
	sum := &rp.proc.Summary
	if old, ok := rp.live.get(addr); ok {
		rp.release(old)
		sum.ReplacedBlocks++
	}
	i := rp.site(stack)
	s := &rp.proc.Sites[i]
	rp.touch(s)
	s.Allocations++
	s.BytesAllocated += size
	s.liveBytes += size
	s.liveBlocks++
	sum.Allocations++
	sum.BytesAllocated += size

	rp.live.put(addr, block{size: size, site: i, api: api})
	rp.freed.forget(addr)
	rp.lastAlloc = addr
	rp.liveBytes += size
	rp.liveBlocks++
	if rp.liveBytes > sum.PeakBytes {
		sum.PeakBytes, sum.PeakTime = rp.liveBytes, time
		rp.epoch++
	}
}

// free replays a free event. A realloc to size 0 is one too.
func (rp *replay) free(e *trace.Event) {
	b, ok := rp.live.get(e.Addr)
	if !ok {
		rp.badFree(e, e.Addr)
		return
	}
	rp.checkFamily(b, e)
	rp.freeBlock(e.Addr, b, e.Stack)
}

// realloc replays a realloc: the free of the old block, then the
// allocation of the new one. Freeing first keeps the peak from counting
// both blocks, which would hold only while the data is copied, if at all.
func (rp *replay) realloc(e *trace.Event) {
	if b, ok := rp.live.get(e.OldAddr); ok {
		rp.checkFamily(b, e)
		rp.freeBlock(e.OldAddr, b, e.Stack)
	} else {
		rp.badFree(e, e.OldAddr)
	}
	rp.alloc(e.Addr, e.Size, e.API, e.Stack, e.Time)
}

// freeBlock removes the live block b at addr, freed from freeStack.
func (rp *replay) freeBlock(addr uint64, b block, freeStack uint64) {
	s := &rp.proc.Sites[b.site]
	rp.release(b)
	s.Frees++
	rp.proc.Summary.Frees++
	if addr == rp.lastAlloc {
		s.Temporary++
		rp.proc.Summary.Temporary++
	}
	rp.live.remove(addr)
	rp.freed.add(addr, freedBlock{allocStack: s.Stack, freeStack: freeStack, size: b.size, allocAPI: b.api})
}

// release takes the bytes of block b out of the live counts.
func (rp *replay) release(b block) {
	s := &rp.proc.Sites[b.site]
	rp.touch(s)
	s.liveBytes -= b.size
	s.liveBlocks--
	rp.liveBytes -= b.size
	rp.liveBlocks--
}

// touch is called before a site's live numbers change. It keeps the
// site's numbers at the process's peak without copying every site at every
// new peak:
//
//  1. Every new peak starts a new epoch of the process.
//  2. A site remembers the epoch in which it last saved its peak numbers.
//  3. The first time a site changes in a later epoch, it has not changed
//     since the latest peak, so its live numbers are still those it had at
//     the peak: it saves them as its peak numbers, and the epoch.
//  4. At the end, a site that has not changed since the latest peak takes
//     its live numbers as its peak numbers (see finish).
func (rp *replay) touch(s *Site) {
	if s.epoch != rp.epoch {
		s.PeakBytes, s.PeakBlocks = s.liveBytes, s.liveBlocks
		s.epoch = rp.epoch
	}
}

// site returns the index of the site of stack, adding it if it is new.
func (rp *replay) site(stack uint64) int32 {
	if i, ok := rp.siteOf[stack]; ok {
		return i
	}
	i := int32(len(rp.proc.Sites))
	// A new site had nothing live at any earlier peak: its saved peak
	// numbers, zero, are right for the current epoch.
	rp.proc.Sites = append(rp.proc.Sites, Site{Stack: stack, epoch: rp.epoch})
	rp.siteOf[stack] = i
	return i
}

// inherit makes rp, a fork child that has done nothing yet, start where
// its parent is: the same live blocks from the same (inherited) sites, and
// the parent's totals, as valgrind counts a fork child. The peak starts at
// what is live at the fork.
func (rp *replay) inherit(parent *replay, at uint64) {
	p := rp.proc
	p.Forked = true
	p.Sites = make([]Site, len(parent.proc.Sites))
	for i, s := range parent.proc.Sites {
		if !s.Inherited {
			s.Inherited, s.tree = true, parent.proc.stacks
		}
		s.epoch = 0
		p.Sites[i] = s
	}
	rp.live = parent.live.clone()
	rp.liveBytes, rp.liveBlocks = parent.liveBytes, parent.liveBlocks
	ps := parent.proc.Summary
	p.Summary = Summary{Allocations: ps.Allocations, Frees: ps.Frees, BytesAllocated: ps.BytesAllocated,
		PeakBytes: rp.liveBytes, PeakTime: at}
	rp.epoch = 1
}

func (rp *replay) lost(l *trace.Lost) {
	rp.lostSum += l.Count
	rp.proc.Lost = max(rp.lostSum, rp.lostAtEnd)
	if l.Reason != "" && !slices.Contains(rp.proc.LostReasons, l.Reason) {
		rp.proc.LostReasons = append(rp.proc.LostReasons, l.Reason)
	}
}

// finish completes the process, once its end has been read or else the
// whole trace, and drops the replay state: a trace of many processes holds
// the blocks of those running, not of all.
func (rp *replay) finish() {
	if rp.finished {
		return
	}
	p := rp.proc
	for i := range p.Sites {
		s := &p.Sites[i]
		if s.epoch != rp.epoch {
			s.PeakBytes, s.PeakBlocks = s.liveBytes, s.liveBlocks
		}
		s.InUseAtExitBytes, s.InUseAtExitBlocks = s.liveBytes, s.liveBlocks
	}
	slices.SortFunc(p.Sites, func(a, b Site) int {
		if a.Inherited != b.Inherited {
			if a.Inherited {
				return 1
			}
			return -1
		}
		return cmpUint(a.Stack, b.Stack)
	})
	p.Summary.InUseAtExitBytes, p.Summary.InUseAtExitBlocks = rp.liveBytes, rp.liveBlocks
	if !p.Ended {
		p.End = max(p.Start, rp.lastTime)
	}
	sortProblems(p.Problems)
	*rp = replay{proc: p, started: rp.started, finished: true, lostSum: rp.lostSum, lostAtEnd: rp.lostAtEnd}
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
