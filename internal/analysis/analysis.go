// Package analysis replays a trace into a Model: for each process of the
// trace, how much it allocated and freed, where, how much was live at its
// peak and at its exit, and which of its frees were wrong.
//
// Analyze reads a trace once, as a stream. Its memory grows with the number
// of blocks live at one time and of distinct call stacks, never with the
// length of the trace. Reports, the web UI and the exporters render a Model;
// none of them reads a trace itself.
//
// The counts follow valgrind memcheck's HEAP SUMMARY, so that the two tools
// can be checked against each other:
//
//   - every allocation event is one allocation of its size, even of size 0;
//   - every free of a live block is one free;
//   - a realloc is one allocation of its new size and one free of the old
//     block, as valgrind implements it (malloc, copy, free);
//   - a free or realloc of an address that is not live is not a free: it is
//     counted in Summary.InvalidFrees and listed among the Problems, or, in
//     a process that lost events, in Summary.UncertainFrees. (valgrind
//     counts those calls as frees too: its number is Frees + InvalidFrees +
//     UncertainFrees.)
package analysis

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math/bits"
	"slices"

	"github.com/memtrail/memtrail/internal/trace"
)

// Options are the choices of an analysis. The zero value analyzes every
// event of every process, and keeps DefaultObjects objects of each.
type Options struct {
	// From and To limit the analysis to a window of each process's run:
	// ns after the process started, both included. To 0 means the end of
	// the process. Allocations, frees and their totals count only within
	// the window; the peak is the most live at any moment of it (what was
	// live when it opened included); "in use at exit" is what is live at
	// its end. From == To gives the state at one moment.
	From, To uint64
	// Threads, if set, keeps only the blocks that these threads (by thread
	// index) allocated; the frees of those blocks count whoever made them.
	Threads []uint64
	// Objects is how many objects each of the object lists keeps (see
	// Process.LiveObjects): 0 means DefaultObjects, -1 none.
	Objects int
	// Filter, if set, keeps only the blocks allocated from the call stacks
	// it passes, as Threads keeps those of some threads: every total, the
	// peak and every list count those alone. Symbols come at the end of a
	// trace, so the stacks are read in Stacks, an analysis of the same
	// trace made before (with any options); AnalyzeFile makes one.
	//
	// Stacks also lets an analysis of a window stop reading at the end of
	// the window, when Stacks is of the whole trace, complete and without
	// warnings: what the trace has after the window (the ends of the
	// processes, their later threads, losses and symbols) is then taken
	// from it. The web UI looks at window after window that way.
	Filter StackFilter
	Stacks *Model
	// HeapMap, if not 0, asks for the map of the address space of the
	// blocks live at the end of the window, in about that many cells
	// (Process.HeapMap).
	HeapMap int
	// LeaveOutInherited leaves out of a fork child the heap it inherited
	// from its parent: its totals, peak, sites and in use at exit are of
	// the blocks it allocated itself. The inherited blocks are kept only
	// so that their frees are known for what they are (neither frees of
	// its blocks nor invalid ones). By default a fork child begins with a
	// copy of its parent's heap and totals, as valgrind counts them.
	LeaveOutInherited bool
	// Progress, if set, is called every so often while a trace file is
	// read, with the bytes read so far and its size, and once at the end
	// (AnalyzeFile, AnalyzeTrace).
	Progress func(done, total int64)
}

// DefaultObjects is how many objects the object lists keep by default.
const DefaultObjects = 100

func (o *Options) objects() int {
	switch {
	case o.Objects < 0:
		return 0
	case o.Objects == 0:
		return DefaultObjects
	}
	return o.Objects
}

// afterWindow reports whether t, ns after a process started, is past the
// window's end.
func (o *Options) afterWindow(t uint64) bool { return o.To != 0 && t > o.To }

// filters reports whether o keeps only some of the blocks.
func (o *Options) filters() bool { return len(o.Threads) > 0 || !o.Filter.IsZero() }

func (o *Options) countsThread(thread uint64) bool {
	return len(o.Threads) == 0 || slices.Contains(o.Threads, thread)
}

// Model is what a trace says about the memory of the processes it recorded.
type Model struct {
	Info      *trace.Info // nil if the trace's first block was unreadable
	Processes []*Process  // in the order they started
	Warnings  []string    // what was wrong with the trace itself
	Complete  bool        // the trace has its end record
	// Damaged says that parts of the trace could not be read (Warnings
	// says which): the model misses what they held.
	Damaged bool
	// Unmatched names the expressions of the filter (function, file,
	// module, ignore) that no frame of the call stack of any allocation
	// matched: a filter of a typo keeps nothing, or leaves nothing out.
	Unmatched []string
	// filter is Options.Filter: the model holds only the blocks of the
	// call stacks it passed.
	filter StackFilter
	// stopped says that the analysis stopped reading at the end of its
	// window (see Options.Stacks).
	stopped bool
}

// Filter returns the stack filter the model was made with: it holds only
// the blocks allocated from the call stacks the filter passed.
func (m *Model) Filter() StackFilter { return m.filter }

// Process is the analysis of one process: one program image, from its
// start (a fork or an exec) to its end (an exit, a signal or an exec).
type Process struct {
	ID     uint64 // trace-local, as in trace.Process
	PID    uint64
	PPID   uint64
	Parent uint64 // ID of the parent process in the trace, 0 if it is not in it
	Exe    string
	Args   []string
	Cwd    string
	// Forked says that the process was started by a fork of Parent rather
	// than by an exec: it began with a copy of its parent's heap, whose
	// blocks and totals it inherited (as valgrind counts them).
	Forked bool
	// InheritedLeftOut says that the analysis left out the heap the fork
	// child inherited (Options.LeaveOutInherited): its numbers are of its
	// own allocations.
	InheritedLeftOut bool

	Start uint64 // ns since the trace's time zero
	End   uint64 // ns since time zero; the last time seen if Ended is false
	Ended bool   // the trace says how it ended
	How   trace.EndHow
	Code  int64 // exit status or signal number

	// LeakScan is the classification of the blocks still allocated at
	// the process's normal exit (unless recorded with memtrail run -leak-check=false), if the trace
	// has one; see LeakClasses.
	LeakScan *trace.LeakScan

	Lost        uint64   // events known to be missing
	LostReasons []string // why, as the recorder said
	// NotRecorded says what the recorder could not record of the
	// process, and why (the trace's Warning records): the program
	// bypasses memtrail's hooks.
	NotRecorded []string

	Summary  Summary
	Sites    []Site    // one per call stack that allocated, by stack ID
	Problems []Problem // by kind, then by count, most frequent first
	// Threads holds each thread of the process, by index (Threads[0] is
	// thread 1): what it allocated, and its own peak.
	Threads []ThreadSummary
	// Bins are mprof's allocation bins: Bins[n] counts the allocations of
	// n bytes for n up to 1024, and Bins[1025] those of more.
	Bins []Bin
	// Sizes is the size histogram: Sizes[0] counts the allocations of 0
	// bytes, Sizes[i] those of 2^(i-1) to 2^i - 1 bytes.
	Sizes [65]SizeBucket
	// Timeline samples the heap over the window, in equal steps.
	Timeline Timeline
	// LiveObjects are the biggest objects live at the end of the window,
	// and OldestObjects the oldest; FreedObjects those that lived longest
	// of the objects freed in it. Each list holds at most Options.Objects.
	LiveObjects, OldestObjects, FreedObjects []HeapObject
	// HeapMap is the map of the blocks live at the end of the window, if
	// Options.HeapMap asked for it.
	HeapMap *HeapMap
	// LostChains are the definitely lost blocks of the scan at exit (see
	// LeakScan) with the indirectly lost blocks that hang from them,
	// grouped by the call stack of the lost block: most bytes first.
	LostChains []LostChain
	// PossiblyLost are the possibly lost blocks of the scan at exit, by
	// the call stack that allocated them: most bytes first.
	PossiblyLost []ChainPart
	// OriginsLooked says that the trace looked for where the leaks were
	// made (memtrail run -leak-origins): see LostChain.Origins.
	OriginsLooked bool
	// Window is the part of the run analyzed, in ns after the start
	// (Options.From and To, with To filled in if it was the end).
	Window struct{ From, To uint64 }

	stacks *stackTree
}

// ThreadSummary is what one thread allocated, and the peak of the blocks
// it allocated. Blocks a fork child inherited belong to no thread.
type ThreadSummary struct {
	Index, TID       uint64
	Allocations      uint64
	BytesAllocated   uint64
	Frees            uint64 // of blocks it allocated, by any thread
	PeakBytes        uint64 // the most bytes of its blocks live at one time
	PeakTime         uint64 // ns since time zero
	InUseAtExitBytes uint64
	// StackPeakBytes is the most of the thread's stack in use, from its
	// base down: the deepest its allocator calls were made from or, for a
	// window that is the whole run, the high-water mark the agent found
	// by painting its stack (trace.ThreadStack), which may have been
	// reached between two of its events. StackPeakTime is when its
	// deepest allocator call was made (a deeper high-water mark was
	// reached at a time not known). StackSampledOnly says that the trace
	// has no high-water mark of the thread, or the window is not the
	// whole run: the deepest point between its events may be deeper.
	StackPeakBytes   uint64
	StackPeakTime    uint64
	StackSampledOnly bool
	// StackCalls counts the thread's function entries and returns whose
	// stack in use was measured (trace.StackCalls: a program built with
	// -finstrument-functions, recorded with -stack-calls). A thread that
	// has them has an exact stack peak: its deepest entry or heap event,
	// whichever is deeper, at its time; its painted high-water mark, which
	// counts the agent's own frames below the program's, is not used.
	StackCalls uint64
	liveBytes  uint64
	// stackNow is the stack in use at the thread's latest event, 0 once
	// it has ended; stackHighWater the highest of its ThreadStack records.
	stackNow, stackHighWater uint64
}

// DeepestStack is the moment a thread's stack went deepest: a function
// entry (with -stack-calls) or else a heap event.
type DeepestStack struct {
	Thread uint64 // the thread's index
	Time   uint64 // ns since time zero
	Bytes  uint64 // stack in use
	Stack  uint64 // the call stack then; 0 if none was taken
	// FunctionEntry says the moment was a function entry; else it was
	// the heap event with the deepest stack in use.
	FunctionEntry bool
	// FrameSizes gives, for a function entry, the bytes of each frame of
	// Stack, innermost first (trace.DeepestStack.FrameSizes).
	FrameSizes []uint64
}

// BinCount is the number of mprof bins: one per size up to 1024, and one
// for all larger sizes.
const BinCount = 1026

// Bin counts the allocations of one size (or of the sizes above 1024).
type Bin struct {
	Allocations uint64
	Bytes       uint64
	Frees       uint64
	KeptBytes   uint64 // in use at exit ("kept", in mprof's words)
	KeptBlocks  uint64
}

// binOf returns the index in Process.Bins of an allocation of size bytes.
func binOf(size uint64) int { return int(min(size, BinCount-1)) }

// SizeBucket counts the allocations of a range of sizes.
type SizeBucket struct {
	Allocations, Bytes uint64
}

// sizeBucketOf returns the index in Process.Sizes of size bytes.
func sizeBucketOf(size uint64) int { return bits.Len64(size) }

// HeapObject is a block of memory followed through its reallocs: a realloc
// that moves a block moves the object, which keeps the time it was first
// allocated. Its site is that of its latest block, as in Process.Sites.
type HeapObject struct {
	Addr      uint64 // where it is (or was, when freed)
	Size      uint64 // its size then
	Allocated uint64 // ns since time zero, when it was first allocated
	Freed     uint64 // ns since time zero; 0 if it is live
	Thread    uint64 // the thread index that first allocated it; 0 if inherited
	Reallocs  uint64
	Site      int // index in Process.Sites of its latest block's stack
	API       trace.API
	// FreeStack is the stack ID of the free of an object freed (0 if it
	// is live, or the free had no stack).
	FreeStack uint64
}

// Age returns how long o lived: until it was freed, or until end.
func (o *HeapObject) Age(end uint64) uint64 {
	if o.Freed != 0 {
		end = o.Freed
	}
	if end < o.Allocated {
		return 0
	}
	return end - o.Allocated
}

// RunTime returns how long the process ran, in ns.
func (p *Process) RunTime() uint64 {
	if p.End < p.Start {
		return 0
	}
	return p.End - p.Start
}

// Summary holds the totals of a process.
type Summary struct {
	Allocations       uint64
	Frees             uint64
	BytesAllocated    uint64
	PeakBytes         uint64 // the most bytes live at one time
	PeakTime          uint64 // ns since time zero when PeakBytes was first reached
	InUseAtExitBytes  uint64 // live at the end of the process
	InUseAtExitBlocks uint64
	Temporary         uint64 // allocations freed before any other allocation

	// StackPeakBytes is the most stack in use at one time, summed over
	// the threads live then (each thread's stack in use at its latest
	// event), and StackPeakTime when it was first reached. PeakTotalBytes
	// is the most heap and stack in use together, at PeakTotalTime.
	// Stacks are sampled at heap events: these miss what a thread used
	// between two of its events (see ThreadSummary.StackPeakBytes). Only
	// the threads Options.Threads keeps count; Options.Filter, which
	// picks heap blocks by call stack, leaves the stacks as they are.
	StackPeakBytes uint64
	StackPeakTime  uint64
	PeakTotalBytes uint64
	PeakTotalTime  uint64
	// StackCalls counts the function entries and returns measured (see
	// ThreadSummary.StackCalls): with them the stack peaks count the
	// deepest entry of each time unit, not only heap events.
	StackCalls uint64
	// DeepestStack is the deepest stack in use of one thread in the
	// window, with its call stack; its Bytes are 0 if the trace has no
	// stack in use.
	DeepestStack DeepestStack

	// InvalidFrees counts frees and reallocs of addresses that were not
	// live blocks; they are not in Frees.
	InvalidFrees uint64
	// UncertainFrees counts the frees and reallocs of a process that lost
	// events that would otherwise be invalid or double frees (and counted
	// in InvalidFrees): a lost allocation makes the free of its block look
	// invalid, a lost free makes a later free at the same address look
	// double, and no such free can be told from a real one. They are not
	// in Frees, nor in Problems.
	UncertainFrees uint64
	// ReplacedBlocks counts allocations at addresses that were still live:
	// the frees of the old blocks must have been lost. The old blocks are
	// dropped without counting a free.
	ReplacedBlocks uint64
}

// Site is what the allocations made from one call stack add up to.
type Site struct {
	Stack uint64 // stack ID within its process; 0 if no stack was taken
	// Inherited says that the site is the parent's, as of the fork that
	// started this process: Stack is a stack of the parent (see SiteStack),
	// and the numbers include what the parent did before the fork.
	Inherited         bool
	Allocations       uint64
	BytesAllocated    uint64
	Frees             uint64 // of blocks allocated here
	PeakBytes         uint64 // bytes of blocks from here live at the process's peak
	PeakBlocks        uint64
	InUseAtExitBytes  uint64
	InUseAtExitBlocks uint64
	Temporary         uint64
	// BySize breaks the allocations down by mprof's size categories.
	BySize [SizeCategories]SizeCount
	// Lifetimes counts the objects from here that were freed by how long
	// they lived, in time units, and LifetimeAllocs by how many
	// allocations of the process came between their allocation and their
	// free (0: a temporary allocation); LifetimeBuckets says which bucket
	// holds which.
	Lifetimes      [LifetimeBuckets]uint64
	LifetimeAllocs [LifetimeBuckets]uint64

	// Replay state. live* are the bytes and blocks from here live now;
	// epoch is the process's peak epoch when PeakBytes was last saved.
	liveBytes, liveBlocks uint64
	epoch                 uint64
	tree                  *stackTree // where Stack is, if Inherited
}

// Analyze reads the trace r to its end and returns its model. Damage to the
// trace is not an error: the model holds what could be read, and says what
// could not in its Warnings. The error is for a trace that cannot be read
// at all.
func Analyze(r *trace.Reader, opts Options) (*Model, error) {
	if !opts.Filter.IsZero() && opts.Stacks == nil {
		return nil, errors.New("a stack filter needs the stacks of an analysis of the trace made before")
	}
	a := newAnalyzer(opts)
	a.model.filter = opts.Filter
	return a.run(r)
}

// run replays what r has left of its trace into a's model.
func (a *analyzer) run(r *trace.Reader) (*Model, error) {
	stopAt, canStop := a.windowEnd()
	for {
		// Events come in runs of thousands: replay them where the Reader
		// keeps them.
		events, rec, err := r.NextBatch()
		if a.stops {
			if at, ok := r.BlockStart(); ok && at.Offset == a.stopAt {
				return a.finishAtStop(), nil
			}
		}
		if len(events) > 0 {
			a.events(events)
			if canStop && events[len(events)-1].Time > stopAt && a.sawAll() {
				return a.finishFrom(a.opts.Stacks), nil
			}
			continue
		}
		if err == nil {
			a.record(rec)
			continue
		}
		if errors.Is(err, io.EOF) {
			return a.finish(), nil
		}
		if err := a.damage(err); err != nil {
			return nil, err
		}
	}
}

// windowEnd returns the time (since time zero) after which no event is in
// the window of any process, if the analysis may stop reading there (see
// Options.Stacks).
func (a *analyzer) windowEnd() (uint64, bool) {
	known := a.opts.Stacks
	if a.opts.To == 0 || known == nil || !known.Complete || len(known.Warnings) > 0 || len(known.Processes) == 0 {
		return 0, false
	}
	var end uint64
	for _, kp := range known.Processes {
		end = max(end, kp.Start+a.opts.To)
	}
	return end, true
}

// sawAll reports whether every process of Options.Stacks has begun in
// this analysis.
func (a *analyzer) sawAll() bool {
	for _, kp := range a.opts.Stacks.Processes {
		if rp, ok := a.procs[kp.ID]; !ok || !rp.started {
			return false
		}
	}
	return true
}

// finishFrom completes the model of a window whose end has been read,
// taking what the rest of the trace says from known, the model of all of
// it: the ends of the processes, their later threads and losses, and the
// stacks with their symbols.
func (a *analyzer) finishFrom(known *Model) *Model {
	for _, kp := range known.Processes {
		rp := a.procs[kp.ID]
		p := rp.proc
		p.Ended, p.How, p.Code = kp.Ended, kp.How, kp.Code
		if !rp.finished {
			p.End = kp.End
			rp.lastTime = max(rp.lastTime, kp.End)
		}
		p.Lost, p.LostReasons = kp.Lost, kp.LostReasons
		p.NotRecorded = kp.NotRecorded
		for i := range kp.Threads {
			rp.thread(uint64(i + 1)).TID = kp.Threads[i].TID
		}
		// The process's stack tree takes the nodes and symbols of the
		// known one, in place: the sites a fork child inherited point
		// to it.
		if kp.stacks != nil {
			for id, n := range kp.stacks.nodes.all {
				p.stacks.nodes.set(id, n)
			}
			maps.Copy(p.stacks.modules, kp.stacks.modules)
			p.stacks.syms = kp.stacks.syms
		}
	}
	a.model.Complete, a.model.stopped = known.Complete, true
	return a.finish()
}

// damage takes in an error of the Reader. It returns the error if reading
// cannot go on, and otherwise warns about what was lost.
func (a *analyzer) damage(err error) error {
	var damage *trace.DamageError
	switch {
	case errors.As(err, &damage):
		a.model.Damaged = true
		a.warnf("%v; the counts below miss whatever was in that part", damage)
	case errors.Is(err, trace.ErrIncomplete):
		a.warnf("%v; processes still running then have no end", err)
	default:
		return err
	}
	return nil
}

// analyzer holds the state of one analysis while the trace is read.
type analyzer struct {
	opts  Options
	model *Model
	syms  *symbols
	procs map[uint64]*replay // by process ID
	order []*replay          // in the order processes were first seen
	last  *replay            // the process of the previous event: events come in runs
	// matched says which expressions of the filter matched a frame of the
	// stacks the filter was asked about: those of the allocations.
	matched fieldMatches
	// stops says that the analysis ends where a block begins at offset
	// stopAt of the trace: the end of a stretch of a Windows.
	stops  bool
	stopAt int64
}

func newAnalyzer(opts Options) *analyzer {
	return &analyzer{
		opts:  opts,
		model: &Model{},
		syms:  newSymbols(),
		procs: make(map[uint64]*replay),
	}
}

func (a *analyzer) warnf(format string, args ...any) {
	a.model.Warnings = append(a.model.Warnings, fmt.Sprintf(format, args...))
}

// record takes in one record of the trace.
func (a *analyzer) record(rec trace.Record) {
	switch rec.Kind {
	case trace.KindAlloc, trace.KindFree, trace.KindRealloc:
		a.events([]trace.Event{rec.Event})
	case trace.KindInfo:
		a.model.Info = rec.Info
	case trace.KindProcessStart:
		a.startProcess(rec.Process)
	case trace.KindProcessEnd:
		a.endProcess(rec.ProcessEnd)
	case trace.KindThread:
		if th := rec.Thread; th.Index >= 1 && th.Index <= maxThreads {
			a.process(th.Process).thread(th.Index).TID = th.TID
		}
	case trace.KindThreadEnd:
		if th := rec.ThreadEnd; th.Index >= 1 && th.Index <= maxThreads {
			a.process(th.Process).threadEnded(th.Index)
		}
	case trace.KindThreadStack:
		if th := rec.ThreadStack; th.Index >= 1 && th.Index <= maxThreads {
			ts := a.process(th.Process).thread(th.Index)
			ts.stackHighWater = max(ts.stackHighWater, th.HighWater)
		}
	case trace.KindStackCalls:
		a.process(rec.StackCalls.Process).stackCalls(rec.StackCalls)
	case trace.KindDeepestStack:
		a.process(rec.DeepestStack.Process).deepestStack(rec.DeepestStack)
	case trace.KindLeakScan:
		a.process(rec.LeakScan.Process).leakScan(*rec.LeakScan)
	case trace.KindLeakBlocks:
		a.process(rec.LeakBlocks.Process).leakBlocks(rec.LeakBlocks)
	case trace.KindLeakOrigins:
		a.process(rec.LeakOrigins.Process).leakOrigins(rec.LeakOrigins)
	case trace.KindModule:
		a.process(rec.Module.Process).proc.stacks.modules[rec.Module.ID] = rec.Module.Object
	case trace.KindStackNode:
		n := rec.StackNode
		a.process(n.Process).proc.stacks.nodes.set(n.ID, stackNode{parent: n.Parent, module: n.Module, offset: n.Offset})
	case trace.KindLost:
		a.process(rec.Lost.Process).lost(rec.Lost)
	case trace.KindWarning:
		p := a.process(rec.Warning.Process).proc
		p.NotRecorded = append(p.NotRecorded, rec.Warning.Message)
	case trace.KindFork:
		a.fork(rec.Fork)
	case trace.KindObject, trace.KindString, trace.KindSymbol, trace.KindObjectStatus, trace.KindType:
		a.syms.record(rec)
	case trace.KindEnd:
		a.model.Complete = true
	}
}

// events replays a batch of events, a run of the same process at a time.
func (a *analyzer) events(events []trace.Event) {
	for len(events) > 0 {
		id := events[0].Process
		rp := a.last
		if rp == nil || rp.proc.ID != id {
			rp = a.process(id)
			a.last = rp
		}
		events = events[rp.events(events):]
	}
}

// process returns the replay of process id, making one for a process whose
// start record was lost.
func (a *analyzer) process(id uint64) *replay {
	if rp, ok := a.procs[id]; ok {
		rp.forkOnly = false // something of its own
		return rp
	}
	var unit uint64
	if a.model.Info != nil {
		unit = a.model.Info.TimeUnit
	}
	rp := newReplay(&Process{ID: id, stacks: newStackTree(a.syms, id)}, &a.opts, unit)
	if !a.opts.Filter.IsZero() {
		rp.passes = a.stackPredicate(id)
	}
	a.procs[id] = rp
	a.order = append(a.order, rp)
	return rp
}

// stackPredicate returns whether a stack of process id passes the
// filter, as the stacks of the earlier analysis say. A stack it does not
// know (the process is not in it) passes nothing.
func (a *analyzer) stackPredicate(id uint64) func(stack uint64) bool {
	var known *Process
	for _, p := range a.opts.Stacks.Processes {
		if p.ID == id {
			known = p
		}
	}
	memo := make(map[uint64]bool)
	return func(stack uint64) bool {
		if known == nil {
			return false
		}
		pass, ok := memo[stack]
		if !ok {
			m := a.opts.Filter.matches(known.Stack(stack))
			for i := range m {
				a.matched[i] = a.matched[i] || m[i]
			}
			pass = a.opts.Filter.passes(m)
			memo[stack] = pass
		}
		return pass
	}
}

func (a *analyzer) startProcess(tp *trace.Process) {
	rp := a.process(tp.ID)
	rp.started = true
	p := rp.proc
	p.PID, p.PPID, p.Parent = tp.PID, tp.PPID, tp.Parent
	p.Exe, p.Args, p.Cwd = tp.Exe, tp.Args, tp.Cwd
	p.Start = tp.Time
}

// fork starts the child of a fork with a copy of its parent's heap: the
// child's ProcessStart comes after this record.
func (a *analyzer) fork(f *trace.Fork) {
	parent := a.process(f.Process)
	child := a.process(f.Child)
	if parent.finished || child.started || f.Child == f.Process {
		a.warnf("process %d: a fork record that does not fit the trace was left out", f.Child)
		return
	}
	child.inherit(parent, f.Time)
	child.forkOnly, child.forkedBy = true, f.Process
}

func (a *analyzer) endProcess(end *trace.ProcessEnd) {
	rp := a.process(end.ID)
	p := rp.proc
	p.Ended, p.End, p.How, p.Code = true, end.Time, end.How, end.Code
	rp.lostAtEnd = end.Lost
	p.Lost = max(rp.lostSum, rp.lostAtEnd)
	// The recorder writes all events of a process before its end.
	rp.finish()
}

// finish completes the model once the whole trace has been read.
func (a *analyzer) finish() *Model {
	a.model.Unmatched = a.opts.Filter.unmatched(a.matched)
	for _, rp := range a.order {
		if !rp.started && rp.forkOnly {
			// The recorder kept a place for a fork child that ended
			// before it could connect.
			a.warnf("process %d: forked by process %d but not recorded: it ended before it connected", rp.proc.ID, rp.forkedBy)
			continue
		}
		if !rp.started {
			a.warnf("process %d: its start is missing from the trace", rp.proc.ID)
		}
		rp.finish()
		p := rp.proc
		if rp.late > 0 {
			a.warnf("pid %d: %s after its end were left out", p.PID, plural(rp.late, "event"))
		}
		if n := p.Summary.UncertainFrees; n > 0 {
			a.warnf("pid %d: %s of addresses not in use are uncertain, not called invalid or double frees: %s may explain them",
				p.PID, plural(n, "free"), p.UnseenCause())
		}
		// Of a process recorded through its patched allocator, and no
		// event lost, the recorder's warning says it (see
		// trace.LostOwnAllocator and record's patchedWarning).
		if n := p.Summary.InUseAtExitBlocks; n > 0 && lostBeforeEnd(p) && p.Lost > 0 {
			a.warnf("pid %d: %s lost before the end: blocks counted in use at exit (%s), and in the leak classes, may have been freed unseen",
				p.PID, plural(p.Lost, "event"), plural(n, "block"))
		}
		// A replaced block is one whose free was not seen: lost, or
		// made through an entry of the program's allocator the patch
		// does not reach.
		one, many := "was lost", "were lost"
		if p.PatchedAllocator() {
			one, many = "was not seen", "were not seen"
		}
		switch n := p.Summary.ReplacedBlocks; {
		case n == 1:
			a.warnf("pid %d: 1 allocation returned an address still in use: the free of the old block %s", p.PID, one)
		case n > 1:
			a.warnf("pid %d: %d allocations returned addresses still in use: the frees of the old blocks %s", p.PID, n, many)
		}
		a.model.Processes = append(a.model.Processes, p)
	}
	return a.model
}

// plural writes n and the noun, with an s if n is not 1.
func plural(n uint64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
