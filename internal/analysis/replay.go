package analysis

import (
	"runtime"
	"slices"
	"sync"

	"github.com/memtrail/memtrail/internal/trace"
)

// replay is the state of one process while its events are replayed.
type replay struct {
	proc *Process
	opts *Options
	unit uint64 // the trace's time unit, ns
	// lifetimes finds the bucket of a lifetime in unit.
	lifetimes lifetimeScale
	started   bool   // its start record was read
	finished  bool   // its end record was read, and its replay state dropped
	late      uint64 // events that came after its end, ignored
	// forkOnly says that all the trace has of the process so far is the
	// Fork record of its parent, forkedBy.
	forkOnly bool
	forkedBy uint64
	// filteredScan says that proc.LeakScan counts the blocks a filter
	// keeps, as the LeakBlocks records come (leakScan).
	filteredScan bool

	heap       heapTable               // the blocks live now and freed lately, by address
	leads      map[uint64]ChainPart    // what each definitely lost block at exit holds (leakBlocks)
	sites      siteIndex               // index in proc.Sites by stack ID; uncounted if filtered out
	passes     func(stack uint64) bool // Options.Filter on this process's stacks; nil: no filter
	liveBytes  uint64                  // of the blocks that count (Options.Threads)
	liveBlocks uint64
	// stackBytes is the stack in use now: the sum of stackNow over the
	// threads that count (Options.Threads).
	stackBytes uint64

	// windowOpen says that the window of Options has begun: totals count,
	// and the peak moves.
	windowOpen bool

	// epoch counts the peaks reached so far: every time the live bytes
	// exceed the peak, the peak moves and the epoch goes up. See touch.
	epoch uint64

	// lastAlloc is the address of the latest allocation. A free of it is
	// the free of a temporary allocation: no other allocation came between.
	lastAlloc uint64
	// allocClock counts the process's allocations: the clock that
	// lifetimes in allocations are read on.
	allocClock uint64

	problems map[problemKey]int // index in proc.Problems

	timeline    timelineBuilder
	freedLonger topObjects // the objects freed in the window that lived longest

	lastTime  uint64 // of the latest event
	lostSum   uint64 // of the process's lost records
	lostAtEnd uint64 // as its end record says
	// begun says that an event of the process was seen: the first may
	// move its start (see events).
	begun bool
}

// block is a live block. It holds no pointer, so that the garbage collector
// need not scan the map of live blocks, by far the largest thing here.
type block struct {
	size uint64
	// born and bornClock are when the object this block holds was first
	// allocated (a realloc moves an object to a new block), in ns since
	// time zero and on the allocation clock.
	born, bornClock uint64
	reallocs        uint32
	site            int32  // index in proc.Sites; uncounted if a filter left it out
	thread          uint32 // the thread index that first allocated it; 0 if inherited or past maxThreads
	api             trace.API
}

// uncounted marks a block that Options.Threads or Options.Filter leaves
// out: it is kept only so that its free is not taken for an invalid one.
const uncounted = -1

// maxThreads bounds the thread indexes the replay keeps a summary of: a
// damaged trace may name any index, and the summaries are a slice. The
// blocks of a thread past it belong to no thread, as inherited ones do.
const maxThreads = 1 << 20

// threadOf returns the thread index of an event, 0 if it is past
// maxThreads.
func threadOf(e *trace.Event) uint32 {
	if e.Thread > maxThreads {
		return 0
	}
	return uint32(e.Thread)
}

func newReplay(p *Process, opts *Options, unit uint64) *replay {
	return &replay{
		proc:        p,
		opts:        opts,
		unit:        max(unit, 1),
		lifetimes:   newLifetimeScale(unit),
		problems:    make(map[problemKey]int),
		freedLonger: topObjects{n: opts.objects(), by: byAge},
	}
}

// sinceStart returns t, ns since time zero, in ns since the process began.
func (rp *replay) sinceStart(t uint64) uint64 {
	if t < rp.proc.Start {
		return 0
	}
	return t - rp.proc.Start
}

// events replays the events of the process that events begins with, up
// to the first of another process, and returns how many that was. The
// run ends where it is replayed: a pass of its own to find its end would
// read every event twice, and an event comes from another core.
func (rp *replay) events(events []trace.Event) int {
	if len(events) == 0 {
		return 0
	}
	id := events[0].Process
	if !rp.begun {
		// Event times are rounded down to the time unit, and the start
		// record's is not: the first events may seem to come before
		// the process started. It starts no later than they do, so
		// that their times and ages after its start hold together.
		rp.begun = true
		rp.proc.Start = min(rp.proc.Start, events[0].Time)
	}
	if rp.finished {
		n := 1
		for n < len(events) && events[n].Process == id {
			n++
		}
		rp.late += uint64(n)
		return n
	}
	// Most events come with the window open to the end, and every thread
	// counting: nothing to check per event but the event.
	if rp.windowOpen && rp.opts.To == 0 && len(rp.opts.Threads) == 0 {
		return rp.eventsOpen(events, id)
	}
	for i := range events {
		e := &events[i]
		if e.Process != id {
			return i
		}
		rp.lastTime = max(rp.lastTime, e.Time)
		if (!rp.windowOpen || rp.opts.To != 0) && !rp.inWindow(e) {
			rp.stackSample(e)
			continue
		}
		th := rp.stackSample(e)
		rp.event(e)
		if rp.windowOpen { // (events before it are replayed, not counted)
			rp.stackPeaks(e, th)
		}
	}
	return len(events)
}

// eventsOpen replays the run of events of process id as events does, with
// the window open to the end and no thread filter: stackSample, event and
// stackPeaks in one loop, for the calls and the reloads of the state they
// share cost as much as their work.
func (rp *replay) eventsOpen(events []trace.Event, id uint64) int {
	p := rp.proc
	sum := &p.Summary
	// No call below reads lastTime: it is kept here until the end.
	lastTime := rp.lastTime
	n := len(events)
	var run allocRun
	for i := range events {
		e := &events[i]
		if e.Process != id {
			n = i
			break
		}
		lastTime = max(lastTime, e.Time)
		// stackSample, with countsThread true. Thread-1 < maxThreads
		// is threadOf(e) != 0.
		var th *ThreadSummary
		if e.StackInUse != 0 && e.Thread-1 < maxThreads && e.API != trace.APILost {
			th = rp.thread(e.Thread)
			rp.stackBytes += e.StackInUse - th.stackNow
			th.stackNow = e.StackInUse
		}
		switch e.Kind {
		case trace.KindAlloc:
			if run.site != nil {
				if e.Stack == run.stack && e.Thread == run.thread && e.Size != 0 {
					rp.allocInRun(e, &run)
					break
				}
				rp.endRun(&run)
			}
			// An allocation that repeats the stack and thread of the
			// one before starts a run.
			if i > 0 && e.Stack == events[i-1].Stack && e.Thread == events[i-1].Thread &&
				events[i-1].Kind == trace.KindAlloc && e.Size != 0 && rp.startRun(&run, e) {
				rp.allocInRun(e, &run)
			} else {
				rp.alloc(e, e.Addr, nil)
			}
		case trace.KindFree:
			rp.endRun(&run)
			rp.free(e)
		case trace.KindRealloc:
			rp.endRun(&run)
			rp.realloc(e)
		}
		// stackPeaks. The event may have added a thread summary, but
		// only of its own thread, which th already was.
		if total := rp.liveBytes + rp.stackBytes; total > sum.PeakTotalBytes {
			sum.PeakTotalBytes, sum.PeakTotalTime = total, e.Time
		}
		if th == nil {
			continue
		}
		// threadStackPeaks, without its call when no stack peak moves
		// and the event falls in the step of the one before, as most
		// do.
		tl := &rp.timeline
		if sb := rp.stackBytes; th.stackNow > th.StackPeakBytes || th.stackNow > sum.DeepestStack.Bytes ||
			sb > sum.StackPeakBytes || e.Time >= tl.lastEnd {
			rp.threadStackPeaks(e, th)
		} else {
			tl.last.StackBytes = max(tl.last.StackBytes, sb)
			tl.stackNow = sb
		}
	}
	rp.endRun(&run)
	rp.lastTime = lastTime
	return n
}

// allocRun is a run of allocations in eventsOpen from one stack and one
// thread, none of 0 bytes, as a program that builds a big heap makes: what
// they add to their site's, their thread's and the process's totals is
// summed here and added once, at the end of the run (endRun), not at each.
//
// Within a run the live bytes only grow, so the peaks of the process and
// of the thread, if they move, move last at its latest allocation, and the
// site's live numbers are those of the process's latest peak until the
// run adds to them (see touch): adding the sums at the end, with one new
// epoch if the peak moved, leaves the same numbers as adding at each.
// Every other event ends the run first, for it may read or change them.
type allocRun struct {
	stack  uint64
	thread uint64 // Event.Thread
	// site is the run's site, nil if there is no run. It holds while
	// the run does: only a new site grows proc.Sites, and its event ends
	// the run. The thread's summary is looked up at each flush, for the
	// stack sample of the event that ends the run may add a thread.
	site       *Site
	siteIndex  int32
	blockTh    uint32 // threadOf the events
	n, bytes   uint64 // allocations and bytes not added yet
	latestTime uint64 // of the latest allocation
}

// startRun starts a run of the stack and thread of allocation e, which
// repeats those of the allocation before, if their site counts. It
// reports whether it did.
func (rp *replay) startRun(run *allocRun, e *trace.Event) bool {
	site, ok := rp.sites.get(e.Stack)
	if !ok || site == uncounted {
		return false
	}
	run.stack, run.thread = e.Stack, e.Thread
	run.siteIndex, run.site = site, &rp.proc.Sites[site]
	run.blockTh = threadOf(e)
	return true
}

// allocInRun replays allocation e of run as alloc does, but adds to the
// site's, the thread's and the process's totals only at endRun.
func (rp *replay) allocInRun(e *trace.Event, run *allocRun) {
	p := rp.proc
	rp.allocClock++
	// Field by field: see alloc.
	var b block
	b.size, b.api = e.Size, e.API
	b.born, b.bornClock, b.thread, b.site = e.Time, rp.allocClock, run.blockTh, run.siteIndex
	rp.lastAlloc = e.Addr
	if old, replaced := rp.heap.put(e.Addr, e.Handle, e.Block, &b); replaced {
		// Rare: release reads what the run has not added yet. The run
		// goes on from the live numbers release leaves.
		rp.flushRun(run)
		rp.release(old)
		p.Summary.ReplacedBlocks++
	}
	run.n++
	run.bytes += e.Size
	run.latestTime = e.Time
	rp.liveBytes += e.Size
	rp.liveBlocks++
	rp.countSize(run.site, e.Size, e.Time)
}

// countSize adds an allocation of size bytes at time t, live already, to
// its site's and the process's counts by size and to the timeline.
func (rp *replay) countSize(s *Site, size, t uint64) {
	p := rp.proc
	cat := &s.BySize[categoryOf(size)]
	cat.Allocations++
	cat.Bytes += size
	if p.Bins == nil {
		p.Bins = make([]Bin, BinCount)
	}
	bin := &p.Bins[binOf(size)]
	bin.Allocations++
	bin.Bytes += size
	sb := &p.Sizes[sizeBucketOf(size)]
	sb.Allocations++
	sb.Bytes += size
	pt := rp.timeline.point(t)
	pt.Allocations++
	pt.BytesAllocated += size
	pt.live(rp.liveBytes, rp.liveBlocks)
}

// flushRun adds to the totals what run's allocations since its last flush
// add to them.
func (rp *replay) flushRun(run *allocRun) {
	if run.n == 0 {
		return
	}
	s, sum := &rp.proc.Sites[run.siteIndex], &rp.proc.Summary
	rp.touch(s)
	s.liveBytes += run.bytes
	s.liveBlocks += run.n
	s.Allocations += run.n
	s.BytesAllocated += run.bytes
	sum.Allocations += run.n
	sum.BytesAllocated += run.bytes
	var th *ThreadSummary
	if run.blockTh != 0 {
		th = rp.thread(uint64(run.blockTh))
		th.liveBytes += run.bytes
		th.Allocations += run.n
		th.BytesAllocated += run.bytes
	}
	rp.raisePeaks(th, run.latestTime)
	run.n, run.bytes = 0, 0
}

// raisePeaks moves the peaks of thread th (if not nil) and of the process
// up to their live bytes where those are higher, at time t: after an
// allocation, or a run of them. A new process peak starts an epoch (see
// touch).
func (rp *replay) raisePeaks(th *ThreadSummary, t uint64) {
	if th != nil && th.liveBytes > th.PeakBytes {
		th.PeakBytes, th.PeakTime = th.liveBytes, t
	}
	if sum := &rp.proc.Summary; rp.liveBytes > sum.PeakBytes {
		sum.PeakBytes, sum.PeakTime = rp.liveBytes, t
		rp.epoch++
	}
}

// endRun flushes run and ends it: the event that comes may grow
// proc.Sites.
func (rp *replay) endRun(run *allocRun) {
	if run.site != nil {
		rp.flushRun(run)
		run.site = nil
	}
}

// stackSample takes in the stack in use of event e: its thread's, and the
// process's. It returns the thread's summary if e measured it (a free of
// API APILost is not the program's call), else nil.
func (rp *replay) stackSample(e *trace.Event) *ThreadSummary {
	i := uint64(threadOf(e))
	if e.StackInUse == 0 || i == 0 || e.API == trace.APILost || !rp.opts.countsThread(i) {
		return nil
	}
	th := rp.thread(i)
	rp.stackBytes += e.StackInUse - th.stackNow
	th.stackNow = e.StackInUse
	return th
}

// stackCalls takes in what a thread's stack did at its function entries
// and returns up to c.Time: at its deepest (c.Max) the process's stack in
// use was that of the other threads' latest events plus c.Max; the
// thread's stack in use is c.Level after it.
func (rp *replay) stackCalls(c *trace.StackCalls) {
	if rp.finished || c.Thread == 0 || c.Thread > maxThreads || !rp.opts.countsThread(c.Thread) {
		return
	}
	th := rp.thread(c.Thread)
	if rp.recordInWindow(c.Time) {
		th.StackCalls += c.Calls
		rp.proc.Summary.StackCalls += c.Calls
		atMax := rp.stackBytes - th.stackNow + c.Max
		sum := &rp.proc.Summary
		highest(&th.StackPeakBytes, &th.StackPeakTime, c.Max, c.Time)
		highest(&sum.StackPeakBytes, &sum.StackPeakTime, atMax, c.Time)
		highest(&sum.PeakTotalBytes, &sum.PeakTotalTime, rp.liveBytes+atMax, c.Time)
		rp.timeline.stackPeak(c.Time, atMax)
		rp.stackBytes += c.Level - th.stackNow
		rp.timeline.stackNow = rp.stackBytes
	} else {
		rp.stackBytes += c.Level - th.stackNow
	}
	th.stackNow = c.Level
}

// recordInWindow reports whether a record of time t (ns since time zero)
// is in the window, opening it as an event would: a program built for
// exact mode may make many calls before its first heap event.
func (rp *replay) recordInWindow(t uint64) bool {
	since := rp.sinceStart(t)
	if rp.opts.afterWindow(since) {
		return false
	}
	rp.lastTime = max(rp.lastTime, t)
	if !rp.windowOpen && since >= rp.opts.From {
		rp.openWindow(rp.proc.Start + rp.opts.From)
	}
	return rp.windowOpen
}

// deepestStack takes in the call stack of a thread's deepest function
// entry, if it is the deepest yet in the window.
func (rp *replay) deepestStack(d *trace.DeepestStack) {
	if rp.finished || d.Thread == 0 || !rp.opts.countsThread(d.Thread) || !rp.recordInWindow(d.Time) {
		return
	}
	if d.Bytes > rp.proc.Summary.DeepestStack.Bytes {
		rp.proc.Summary.DeepestStack = DeepestStack{Thread: d.Thread, Time: d.Time, Bytes: d.Bytes, Stack: d.Stack,
			FunctionEntry: true, FrameSizes: d.FrameSizes}
	}
}

// stackPeaks moves the stack peaks on after event e of the window, whose
// stack in use th's sample was, if it had one.
func (rp *replay) stackPeaks(e *trace.Event, th *ThreadSummary) {
	sum := &rp.proc.Summary
	if total := rp.liveBytes + rp.stackBytes; total > sum.PeakTotalBytes {
		sum.PeakTotalBytes, sum.PeakTotalTime = total, e.Time
	}
	if th != nil {
		rp.threadStackPeaks(e, th)
	}
}

// threadStackPeaks moves on the stack peaks that event e of the window
// may have reached with th's sample of its stack in use.
func (rp *replay) threadStackPeaks(e *trace.Event, th *ThreadSummary) {
	sum := &rp.proc.Summary
	if th.stackNow > th.StackPeakBytes {
		th.StackPeakBytes, th.StackPeakTime = th.stackNow, e.Time
	}
	if th.stackNow > sum.DeepestStack.Bytes {
		sum.DeepestStack = DeepestStack{Thread: uint64(threadOf(e)), Time: e.Time, Bytes: th.stackNow, Stack: e.Stack}
	}
	if rp.stackBytes > sum.StackPeakBytes {
		sum.StackPeakBytes, sum.StackPeakTime = rp.stackBytes, e.Time
	}
	// timeline.stack, without its call when the event falls in the step
	// of the one before, as most do.
	if tl := &rp.timeline; e.Time < tl.lastEnd {
		pt := tl.last
		pt.StackBytes = max(pt.StackBytes, rp.stackBytes)
		tl.stackNow = rp.stackBytes
		return
	}
	rp.timeline.stack(e.Time, rp.stackBytes)
}

// threadEnded takes the stack of thread i, which has ended, out of the
// stack in use.
func (rp *replay) threadEnded(i uint64) {
	th := rp.thread(i)
	rp.stackBytes -= th.stackNow
	th.stackNow = 0
	if rp.windowOpen && !rp.finished {
		rp.timeline.stackNow = rp.stackBytes
	}
}

// inWindow reports whether e, an event of the process, is in the window of
// the options, and opens the window when it comes to its start.
func (rp *replay) inWindow(e *trace.Event) bool {
	t := rp.sinceStart(e.Time)
	if rp.opts.afterWindow(t) {
		return false
	}
	if !rp.windowOpen && t >= rp.opts.From {
		rp.openWindow(rp.proc.Start + rp.opts.From)
	}
	return true
}

// event replays an event of the process in the window.
func (rp *replay) event(e *trace.Event) {
	switch e.Kind {
	case trace.KindAlloc:
		rp.alloc(e, e.Addr, nil)
	case trace.KindFree:
		rp.free(e)
	case trace.KindRealloc:
		rp.realloc(e)
	}
}

// openWindow starts counting at time at (ns since time zero): what is live
// now is the first candidate for the peak, then.
func (rp *replay) openWindow(at uint64) {
	rp.windowOpen = true
	p := rp.proc
	if rp.epoch == 0 || rp.opts.From > 0 || rp.liveBytes > p.Summary.PeakBytes {
		p.Summary.PeakBytes, p.Summary.PeakTime = rp.liveBytes, at
		rp.epoch++
	}
	for i := range p.Threads {
		th := &p.Threads[i]
		th.PeakBytes, th.PeakTime = th.liveBytes, at
		th.StackPeakBytes, th.StackPeakTime = th.stackNow, at
	}
	p.Summary.StackPeakBytes, p.Summary.StackPeakTime = rp.stackBytes, at
	p.Summary.PeakTotalBytes, p.Summary.PeakTotalTime = rp.liveBytes+rp.stackBytes, at
	rp.timeline.start(at, max(rp.unit, 1000))
	rp.timeline.live(at, rp.liveBytes, rp.liveBlocks)
	rp.timeline.stack(at, rp.stackBytes)
}

// thread returns the summary of thread index i (from 1 to maxThreads),
// adding it.
func (rp *replay) thread(i uint64) *ThreadSummary {
	if ths := rp.proc.Threads; i-1 < uint64(len(ths)) {
		return &ths[i-1]
	}
	return rp.addThreads(i)
}

// addThreads adds the summaries of the threads up to index i and returns
// that of i.
func (rp *replay) addThreads(i uint64) *ThreadSummary {
	p := rp.proc
	for uint64(len(p.Threads)) < i {
		p.Threads = append(p.Threads, ThreadSummary{Index: uint64(len(p.Threads) + 1)})
	}
	return &p.Threads[i-1]
}

// alloc allocates a block at addr for event e: a new object, or the next
// block of the object whose previous block was prev (a realloc).
func (rp *replay) alloc(e *trace.Event, addr uint64, prev *block) {
	p := rp.proc
	sum := &p.Summary
	rp.allocClock++
	// Field by field, not a composite literal: the compiler builds that
	// apart and copies it 16 bytes at a time, and the copy waits for the
	// 8-byte writes just made (as in heapTable.put).
	var b block
	b.size, b.api = e.Size, e.API
	if prev != nil {
		b.born, b.bornClock, b.reallocs, b.thread = prev.born, prev.bornClock, prev.reallocs+1, prev.thread
	} else {
		b.born, b.bornClock, b.thread = e.Time, rp.allocClock, threadOf(e)
	}
	rp.lastAlloc = addr
	// A block counts if its object's thread and its own stack pass the
	// filters (an inherited object has no thread of the process).
	if b.thread != 0 && !rp.opts.countsThread(uint64(b.thread)) {
		b.site = uncounted
	} else if d := rp.sites.dense; e.Stack < uint64(len(d)) && d[e.Stack] != 0 {
		// site, without its call: most stacks are known and dense.
		b.site = d[e.Stack] - 2
	} else {
		b.site = rp.site(e.Stack)
	}
	if old, replaced := rp.heap.put(addr, e.Handle, e.Block, &b); replaced {
		rp.release(old)
		sum.ReplacedBlocks++
	}
	if b.site == uncounted {
		return
	}
	s := &p.Sites[b.site]
	rp.touch(s)
	s.liveBytes += e.Size
	s.liveBlocks++
	rp.liveBytes += e.Size
	rp.liveBlocks++
	var th *ThreadSummary
	if b.thread != 0 {
		th = rp.thread(uint64(b.thread))
		th.liveBytes += e.Size
	}
	if !rp.windowOpen {
		return
	}
	s.Allocations++
	s.BytesAllocated += e.Size
	sum.Allocations++
	sum.BytesAllocated += e.Size
	if th != nil {
		th.Allocations++
		th.BytesAllocated += e.Size
	}
	rp.raisePeaks(th, e.Time)
	rp.countSize(s, e.Size, e.Time)
}

// free replays a free event. A realloc to size 0 is one too.
func (rp *replay) free(e *trace.Event) {
	if e.API == trace.APILost {
		// The allocation that comes next went to the block's address:
		// the program freed it, unseen.
		if b, live := rp.heap.take(e.Addr, e.Handle, e.Block); live {
			rp.release(b)
			rp.proc.Summary.ReplacedBlocks++
		}
		return
	}
	b, live := rp.heap.free(e.Addr, e.Handle, e.Block, e.Stack)
	if !live {
		rp.badFree(e, e.Addr)
		return
	}
	rp.checkFamily(b, e)
	rp.freeBlock(e, e.Addr, b, true)
}

// realloc replays a realloc: the free of the old block, then the
// allocation of the new one. Freeing first keeps the peak from counting
// both blocks, which would hold only while the data is copied, if at all.
// The object moves on to the new block.
func (rp *replay) realloc(e *trace.Event) {
	b, live := rp.heap.free(e.OldAddr, e.OldHandle, e.Block, e.Stack)
	if !live {
		rp.badFree(e, e.OldAddr)
		rp.alloc(e, e.Addr, nil)
		return
	}
	rp.checkFamily(b, e)
	rp.freeBlock(e, e.OldAddr, b, false)
	rp.alloc(e, e.Addr, b)
}

// freeBlock takes the block b at addr, freed by event e (and marked freed
// in the heap table already), out of the counts. With dies set, the
// object ends with it (it is not a realloc that moves it).
func (rp *replay) freeBlock(e *trace.Event, addr uint64, b *block, dies bool) {
	p := rp.proc
	if b.site == uncounted {
		return
	}
	// release, in place: the site and the thread are those counted
	// below.
	s := &p.Sites[b.site]
	rp.touch(s)
	s.liveBytes -= b.size
	s.liveBlocks--
	rp.liveBytes -= b.size
	rp.liveBlocks--
	var th *ThreadSummary
	if b.thread != 0 {
		th = rp.thread(uint64(b.thread))
		th.liveBytes -= b.size
	}
	if !rp.windowOpen {
		return
	}
	s.Frees++
	p.Summary.Frees++
	if addr == rp.lastAlloc {
		s.Temporary++
		p.Summary.Temporary++
	}
	if p.Bins == nil {
		p.Bins = make([]Bin, BinCount)
	}
	p.Bins[binOf(b.size)].Frees++
	if th != nil {
		th.Frees++
	}
	pt := rp.timeline.point(e.Time)
	pt.Frees++
	pt.BytesFreed += b.size
	pt.live(rp.liveBytes, rp.liveBlocks)
	if dies {
		lifetime := e.Time - min(b.born, e.Time)
		s.Lifetimes[rp.lifetimes.bucket(lifetime)]++
		s.LifetimeAllocs[allocsBucket(rp.allocClock-b.bornClock)]++
		// The key of freedLonger, byAge, is the lifetime.
		if o := rp.freedLonger.placeFreed(lifetime, b.born, addr); o != nil {
			rp.objectTo(o, addr, b, e.Time)
			o.FreeStack = e.Stack
		}
	}
}

// object returns the object held by block b at addr; freed is when it was
// freed, 0 if it is live.
func (rp *replay) object(addr uint64, b *block, freed uint64) HeapObject {
	var o HeapObject
	rp.objectTo(&o, addr, b, freed)
	return o
}

// objectTo writes the object of object(addr, b, freed) to o, a zero
// HeapObject, field by field (see topObjects.place).
func (rp *replay) objectTo(o *HeapObject, addr uint64, b *block, freed uint64) {
	o.Addr, o.Size, o.Allocated, o.Freed = addr, b.size, b.born, freed
	o.Thread, o.Reallocs, o.Site, o.API = uint64(b.thread), uint64(b.reallocs), int(b.site), b.api
}

// release takes the bytes of block b out of the live counts.
func (rp *replay) release(b *block) {
	if b.site == uncounted {
		return
	}
	s := &rp.proc.Sites[b.site]
	rp.touch(s)
	s.liveBytes -= b.size
	s.liveBlocks--
	rp.liveBytes -= b.size
	rp.liveBlocks--
	if b.thread != 0 {
		rp.thread(uint64(b.thread)).liveBytes -= b.size
	}
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

// site returns the index of the site of stack, adding it if it is new,
// or uncounted if the stack filter leaves it out.
func (rp *replay) site(stack uint64) int32 {
	if i, ok := rp.sites.get(stack); ok {
		return i
	}
	if rp.passes != nil && !rp.passes(stack) {
		rp.sites.set(stack, uncounted)
		return uncounted
	}
	i := int32(len(rp.proc.Sites))
	// A new site had nothing live at any earlier peak: its saved peak
	// numbers, zero, are right for the current epoch.
	if len(rp.proc.Sites) == cap(rp.proc.Sites) {
		// Double: append grows a big slice by a quarter, and a Site is
		// big, so a program of many call stacks would copy its sites
		// over and over.
		rp.proc.Sites = slices.Grow(rp.proc.Sites, len(rp.proc.Sites)+64)
	}
	rp.proc.Sites = append(rp.proc.Sites, Site{Stack: stack, epoch: rp.epoch})
	rp.sites.set(stack, i)
	return i
}

// siteIndex maps stack IDs to site indexes. Stack IDs count from 1 in
// each process, so most are found by indexing a slice, which costs a
// fraction of a map lookup (one for every allocation); the few above
// denseStacks (a damaged trace's) go to a map.
type siteIndex struct {
	dense  []int32 // index+2 by stack ID (so that uncounted is 1); 0: not seen
	sparse map[uint64]int32
}

const denseStacks = 1 << 24

func (x *siteIndex) get(stack uint64) (int32, bool) {
	if stack < uint64(len(x.dense)) {
		i := x.dense[stack]
		return i - 2, i != 0
	}
	if stack < denseStacks {
		return 0, false
	}
	i, ok := x.sparse[stack]
	return i, ok
}

func (x *siteIndex) set(stack uint64, i int32) {
	if stack >= denseStacks {
		if x.sparse == nil {
			x.sparse = make(map[uint64]int32)
		}
		x.sparse[stack] = i
		return
	}
	for uint64(len(x.dense)) <= stack {
		x.dense = append(x.dense, make([]int32, max(1024, len(x.dense)))...)
	}
	x.dense[stack] = i + 2
}

// inherit makes rp, a fork child that has done nothing yet, start where
// its parent is: the same live blocks from the same (inherited) sites, and
// the parent's totals, as valgrind counts a fork child. The peak starts at
// what is live at the fork. The inherited blocks belong to none of the
// child's threads.
func (rp *replay) inherit(parent *replay, at uint64) {
	p := rp.proc
	p.Forked = true
	if rp.opts.LeaveOutInherited {
		rp.inheritUncounted(parent, at)
		return
	}
	p.Sites = make([]Site, len(parent.proc.Sites))
	for i, s := range parent.proc.Sites {
		if !s.Inherited {
			s.Inherited, s.tree = true, parent.proc.stacks
		}
		s.epoch = 0
		p.Sites[i] = s
	}
	rp.heap = parent.heap.clone()
	rp.heap.update(func(b *block) { b.thread = 0 })
	rp.liveBytes, rp.liveBlocks = parent.liveBytes, parent.liveBlocks
	rp.allocClock = parent.allocClock
	ps := parent.proc.Summary
	p.Summary = Summary{Allocations: ps.Allocations, Frees: ps.Frees, BytesAllocated: ps.BytesAllocated,
		PeakBytes: rp.liveBytes, PeakTime: at}
	p.Bins = slices.Clone(parent.proc.Bins)
	p.Sizes = parent.proc.Sizes
	rp.epoch = 1
}

// inheritUncounted makes rp, a fork child that has done nothing yet, start
// with its parent's live blocks, uncounted (Options.LeaveOutInherited):
// nothing live, no totals, no sites.
func (rp *replay) inheritUncounted(parent *replay, at uint64) {
	rp.proc.InheritedLeftOut = true
	rp.heap = parent.heap.clone()
	rp.heap.update(func(b *block) { b.thread, b.site = 0, uncounted })
	rp.allocClock = parent.allocClock
	rp.proc.Summary = Summary{PeakTime: at}
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
	if !p.Ended {
		p.End = max(p.Start, rp.lastTime)
	}
	end := p.End
	if rp.opts.To != 0 {
		end = min(end, p.Start+rp.opts.To)
	}
	if !rp.windowOpen {
		rp.openWindow(p.Start + rp.opts.From)
	}
	p.Window.From, p.Window.To = rp.opts.From, rp.sinceStart(max(end, p.Start+rp.opts.From))
	for i := range p.Sites {
		s := &p.Sites[i]
		if s.epoch != rp.epoch {
			s.PeakBytes, s.PeakBlocks = s.liveBytes, s.liveBlocks
		}
		s.InUseAtExitBytes, s.InUseAtExitBlocks = s.liveBytes, s.liveBlocks
		// The replay's state goes: a model is the same however the
		// replay went (see joinParts).
		s.liveBytes, s.liveBlocks, s.epoch = 0, 0, 0
	}
	wholeRun := rp.opts.From == 0 && rp.opts.To == 0
	for i := range p.Threads {
		th := &p.Threads[i]
		th.InUseAtExitBytes = th.liveBytes
		// The high-water mark is of the whole run, and may have come
		// between events.
		th.StackSampledOnly = th.StackCalls == 0 && (!wholeRun || th.stackHighWater == 0)
		if wholeRun && th.StackCalls == 0 {
			th.StackPeakBytes = max(th.StackPeakBytes, th.stackHighWater)
		}
		th.liveBytes, th.stackNow, th.stackHighWater = 0, 0, 0
	}
	p.Summary.InUseAtExitBytes, p.Summary.InUseAtExitBlocks = rp.liveBytes, rp.liveBlocks
	newIndex := sortSites(p.Sites)
	rp.keptAndLive(newIndex, end)
	if rp.opts.HeapMap > 0 {
		p.HeapMap = rp.heapMap(rp.opts.HeapMap, newIndex)
	}
	p.FreedObjects = rp.freedLonger.sorted()
	for i := range p.FreedObjects {
		p.FreedObjects[i].Site = int(newIndex[p.FreedObjects[i].Site])
	}
	p.Timeline = rp.timeline.finish(end)
	setAsideUncertain(p)
	sortProblems(p.Problems)
	*rp = replay{proc: p, opts: rp.opts, started: rp.started, finished: true, lostSum: rp.lostSum, lostAtEnd: rp.lostAtEnd}
}

// keptAndLive goes over the blocks live at the end (end, in ns since time
// zero): what they keep by size, and the object lists of the live.
//
// A big heap is gone over in two halves at once: this is the replay's
// last work, when the trace has been read and the other cores are idle.
// Each half counts apart, and the counts and lists are joined after:
// sums do not depend on the order, nor do the lists, whose objects all
// differ in their rank (topObjects.placeUnique).
func (rp *replay) keptAndLive(newIndex []int32, end uint64) {
	p := rp.proc
	n := rp.opts.objects()
	idx := rp.heap.indexNow()
	parts := 1
	if idx.Len() >= keptApart && runtime.GOMAXPROCS(0) > 1 {
		parts = 2
	}
	halves := make([]keptPart, parts)
	var wg sync.WaitGroup
	for i := range halves {
		k := &halves[i]
		k.bigger, k.older = topObjects{n: n, by: bySize}, topObjects{n: n, by: byAge, end: end}
		if parts == 1 {
			// Alone: it counts in the sites and bins themselves.
			k.sites, k.bins = p.Sites, p.Bins
		} else {
			k.bySite = make([][SizeCategories]SizeCount, len(p.Sites))
		}
		each := func() {
			rp.heap.eachRefOf(i, parts, func(addr uint64, ref uint32) { k.take(rp, addr, ref, newIndex, end) })
		}
		if parts == 1 {
			each()
		} else {
			wg.Go(each)
		}
	}
	wg.Wait()
	bigger, older := &halves[0].bigger, &halves[0].older
	if parts == 1 {
		p.Bins = halves[0].bins
	}
	for i := range halves {
		k := &halves[i]
		if k.bySite != nil {
			for site := range k.bySite {
				for c := range k.bySite[site] {
					dst, src := &p.Sites[site].BySize[c], &k.bySite[site][c]
					dst.KeptBytes += src.KeptBytes
					dst.KeptBlocks += src.KeptBlocks
				}
			}
			if k.bins != nil {
				if p.Bins == nil {
					p.Bins = make([]Bin, BinCount)
				}
				for b := range k.bins {
					p.Bins[b].KeptBytes += k.bins[b].KeptBytes
					p.Bins[b].KeptBlocks += k.bins[b].KeptBlocks
				}
			}
		}
		if i > 0 {
			bigger.join(&k.bigger)
			older.join(&k.older)
		}
	}
	p.LiveObjects, p.OldestObjects = bigger.sorted(), older.sorted()
}

// keptApart is how many blocks the address index must hold at the end
// for keptAndLive to go over them in two halves. (A variable, so that
// tests can halve small heaps.)
var keptApart = 1 << 18

// keptPart is what keptAndLive counts of a part of the live blocks.
type keptPart struct {
	// bySite holds the counts by site if the part counts apart, else
	// sites are the sites themselves, counted in.
	bySite [][SizeCategories]SizeCount
	sites  []Site
	bins   []Bin // made when a block counts in them
	// bigger and older are the object lists of the part.
	bigger, older topObjects
}

// take counts the block of ref, live at addr at the end (end, in ns since
// time zero), in k. newIndex is where each site went (sortSites).
func (k *keptPart) take(rp *replay, addr uint64, ref uint32, newIndex []int32, end uint64) {
	size, born, site := rp.heap.sizeAt(ref)
	if site == uncounted {
		return
	}
	site = newIndex[site]
	var cat *SizeCount
	if k.bySite != nil {
		cat = &k.bySite[site][categoryOf(size)]
	} else {
		cat = &k.sites[site].BySize[categoryOf(size)]
	}
	cat.KeptBytes += size
	cat.KeptBlocks++
	if k.bins == nil {
		k.bins = make([]Bin, BinCount)
	}
	bin := &k.bins[binOf(size)]
	bin.KeptBytes += size
	bin.KeptBlocks++
	// Most blocks rank in neither list: only those that may are
	// made objects, which costs more than the rest of this. The
	// keys are the size and the age (HeapObject.Age).
	age := uint64(0)
	if end > born {
		age = end - born
	}
	if o := k.bigger.placeUnique(size, born, addr); o != nil {
		k.objectTo(rp, o, addr, ref, site)
	}
	if o := k.older.placeUnique(age, born, addr); o != nil {
		k.objectTo(rp, o, addr, ref, site)
	}
}

// objectTo writes the object of the block of ref, live at addr at the
// end, to o, with its site's new index.
func (k *keptPart) objectTo(rp *replay, o *HeapObject, addr uint64, ref uint32, site int32) {
	var b block
	rp.heap.unpackTo(&b, ref)
	b.site = site
	rp.objectTo(o, addr, &b, 0)
}

// sortSites puts the sites in order — the process's own by stack ID, then
// the inherited ones — and returns where each one went.
func sortSites(sites []Site) []int32 {
	order := make([]int32, len(sites))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(i, j int32) int {
		a, b := &sites[i], &sites[j]
		if a.Inherited != b.Inherited {
			if a.Inherited {
				return 1
			}
			return -1
		}
		return cmpUint(a.Stack, b.Stack)
	})
	newIndex := make([]int32, len(sites))
	for to, from := range order {
		newIndex[from] = int32(to)
	}
	// The sites move in place, a cycle of the permutation at a time: a
	// sorted copy would take as much memory again as the sites, when the
	// replay holds the most.
	for i := range order {
		if order[i] < 0 || int(order[i]) == i {
			continue
		}
		held := sites[i]
		to := i
		for {
			from := int(order[to])
			order[to] = -1
			if from == i {
				sites[to] = held
				break
			}
			sites[to] = sites[from]
			to = from
		}
	}
	return newIndex
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
