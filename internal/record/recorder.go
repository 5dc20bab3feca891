// Package record runs a program with memtrail's agent preloaded, drains
// what the agent publishes in shared memory, restores the order in which
// things happened across threads, and writes the trace.
//
// The recorder is the program's parent. Every process of the run (forks,
// exec'd images, children of system()) connects to it once and gets its own
// shared region; from then on the recorder only reads memory, so a process
// that crashes or is killed with SIGKILL loses nothing it had published.
package record

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/memtrail/memtrail/internal/trace"
)

// Options configure a recording.
type Options struct {
	Args      []string // the program (looked up in PATH) and its arguments
	Output    string   // trace path; "" for <program>.<pid>.mtr in the current directory
	AgentPath string   // the built agent
	MaxFrames int      // call-stack depth limit (default DefaultMaxFrames, at most MaxFramesLimit)
	// RingSize is the size in bytes of the ring of a process's first
	// thread (default DefaultRingSize), a power of two; the rings of the
	// others are a quarter of it, but at least 64 KiB (or RingSize).
	RingSize uint64
	Threads  int // thread slots per process (default 512)
	Stdin    *os.File
	Stdout   *os.File
	Stderr   *os.File
	Log      io.Writer // diagnostics (stderr)
	// Grace is how long processes still running after the program itself
	// has ended are recorded before recording stops (default 1s).
	Grace   time.Duration
	Version string // written into the trace as the recorder's name
	// TimeUnit is the resolution of event times (default 1ms). Order
	// is exact whatever it is; a finer unit costs trace space.
	TimeUnit time.Duration
	// StackCalls makes the agent measure the stack at every entry and
	// return of the functions of programs built with
	// -finstrument-functions, summed up per thread and time unit
	// (trace.StackCalls), and take the call stack of each thread's
	// deepest entry (trace.DeepestStack).
	StackCalls bool
	// LeakScan turns on the leak scan at each normal exit of a process
	// (see leakscan.go), and the live set the recorder keeps for it
	// (liveset.go; what it costs is in docs/performance.md).
	LeakScan bool
	// LeakOrigins, with LeakScan, makes the agent send at each free what
	// the freed block held that may point to blocks, so that each block
	// definitely lost at exit is traced to the last free of a block that
	// pointed to it (trace.LeakOrigins).
	LeakOrigins bool
	// FullUnwind makes the agent unwind every stack whole, without
	// reusing the outer part of the thread's previous stack: for the
	// tests that check the reuse against it.
	FullUnwind bool
	// LeaveOwnAllocator leaves unpatched a program that defines malloc,
	// free, operator new... itself, whose calls are then not recorded
	// (the recorder warns). By default the agent records them by
	// patching the entries of those functions (see
	// internal/agent/csrc/entrypatch.c): the program's allocations made
	// before the agent starts, or through entry points of its allocator
	// that it does not export (chromium's), are then not seen, and their
	// frees are uncertain.
	LeaveOwnAllocator bool
}

// DefaultMaxFrames is the call-stack depth limit by default: deep enough
// for the stacks of interpreters (python3's reach past 64 frames), and
// cheap, since the unwinder reuses the outer part of a thread's previous
// stack (docs/performance.md, "Deep call stacks"). A stack deeper than the
// limit keeps its innermost frames under a root that says how many were
// left out (see trace.StackNode).
const DefaultMaxFrames = 256

// MaxFramesLimit bounds Options.MaxFrames: the agent keeps that many
// frames of each thread's last stack (MT_MAX_FRAMES_LIMIT).
const MaxFramesLimit = 1024

// DefaultRingSize is the default size of the ring of a process's first
// thread; its other threads get a quarter. A ring must hold what a thread
// allocating flat out writes while the recorder is not looking: it sleeps
// about a millisecond when it finds nothing to do, and shares two CPUs
// with the program and its own goroutines. The first thread of most
// programs makes most of their allocations: with 1 MiB for it, python3
// (bench/) ran in 0.93 s rather than 1.22 with 256 KiB, jq in 1.11 rather
// than 1.23; rings of 1 MiB for every thread would add more memory than
// heaptrack does to programs of many threads, 256 KiB for the others add
// 2 MiB to eight.
const DefaultRingSize = 1 << 20

// otherRing is the size of the rings of threads other than the first: a
// ring drains once it holds batchBytes, so it must be a few times that.
func otherRing(first uint64) uint64 { return max(first/4, min(first, 64<<10)) }

// DefaultTimeUnit is the default resolution of event times: ten times
// finer than heaptrack's, fine enough for any timeline, and coarse enough
// that times cost the trace almost nothing (on sqlite3, a tenth of it at
// 100µs). The order of events is exact whatever the unit.
const DefaultTimeUnit = time.Millisecond

// Result describes a finished recording.
type Result struct {
	Path      string
	Program   ProgramEnd
	Processes int
	Events    uint64
	Lost      uint64
	Bytes     int64 // the trace's size
	// Totals over every process, counted as valgrind does (a realloc is
	// an allocation and a free). Where the memory went needs the
	// analysis of the trace: memtrail report.
	Allocations, Frees, BytesAllocated uint64
	// ProgramCPU is the CPU time of the program and the children it
	// waited for: with the agent's work in it, against the same program
	// run alone, it is the cost of recording to the program.
	ProgramCPU time.Duration
	// RunTime is how long the program ran, from its start to its exit.
	RunTime time.Duration
	// RecorderCPU is memtrail's own CPU time.
	RecorderCPU time.Duration
	// Waits counts the times a thread of the program waited for space in
	// its ring because memtrail had not read it yet, and WaitTime is how
	// long they waited in all: what a recorder that did not keep up cost.
	Waits    uint64
	WaitTime time.Duration
	// Calls counts the function entries and returns measured with
	// Options.StackCalls.
	Calls uint64
	// Unrecorded are the processes that exec'd a program the agent could
	// not be loaded into, the first maxUnrecordedListed of them;
	// UnrecordedCount counts them all.
	Unrecorded      []Unrecorded
	UnrecordedCount int
	// WriteErr is set when the trace could not be written completely
	// (e.g. the disk filled up); the part before it is readable.
	WriteErr error
}

// Unrecorded is a recorded process that exec'd a program that was not
// recorded: the trace ends the process with trace.EndExecUnrecorded.
type Unrecorded struct {
	PID int
	Exe string // the recorded program, which exec'd
	// Program is the program exec'd, when the agent saw that it (or its
	// script's interpreter) is statically linked: Static is then set.
	// Otherwise the loader dropped the agent for a reason of its own
	// (setuid or setgid), and the program is not known.
	Program string
	Static  bool
}

// ProgramEnd is how the recorded program itself ended.
type ProgramEnd struct {
	How  trace.EndHow
	Code int64
}

// ExitCode is the status memtrail run exits with: the program's own, or
// 128+signal as a shell reports it.
func (e ProgramEnd) ExitCode() int {
	switch e.How {
	case trace.EndExited:
		return int(e.Code)
	case trace.EndSignaled:
		return 128 + int(e.Code)
	}
	return 1
}

// Recorder is one recording in progress.
type Recorder struct {
	opts    Options
	w       *trace.Writer
	file    *os.File
	tmpName bool   // file has a temporary name, until the program's pid is known
	path    string // where the trace ends up
	clock   clock
	coarse  *coarseClock // the agents' clock; nil when they read the counter
	ev      trace.Event  // the event being written (see newEvent)
	// runBuf holds the events of a run of a thread's allocations and
	// frees that process.run takes from its ring, to write at once.
	runBuf [runEvents]trace.Event
	srv    *server
	log    io.Writer

	procs  []*process // live ones
	nprocs uint64
	byPid  map[int]*process
	// subreaper says that orphaned descendants become the recorder's
	// children.
	subreaper bool
	reserved  []reservedFork
	waiting   []*hello // hellos taken from the server, to connect first
	later     []*hello // hellos that wait for an image to be placed (see mustWait)
	objects   map[string]uint64
	symbols   *symbolTable

	writeErr                           error
	events, lost                       uint64
	allocations, frees, bytesAllocated uint64
	ringWaits, ringWaitNs              uint64 // the agents' waits for ring space
	calls                              uint64 // function entries and returns measured (Options.StackCalls)

	watched time.Time // when /proc was last asked which processes without a pidfd ended

	// The program itself: its wait status, CPU time and run time come
	// from the goroutine that waits for it, before it sends on waits.
	mainPid         int
	mainEnded       bool
	mainStatus      syscall.WaitStatus
	mainStatusKnown bool
	waits           chan waitResult
	programCPU      time.Duration
	runTime         time.Duration

	// The processes that exec'd a program that was not recorded
	// (Result.Unrecorded).
	unrecordedList  []Unrecorded
	unrecordedCount int
}

func (o *Options) defaults() {
	if o.MaxFrames <= 0 {
		o.MaxFrames = DefaultMaxFrames
	}
	o.MaxFrames = min(o.MaxFrames, MaxFramesLimit)
	if o.RingSize == 0 {
		o.RingSize = DefaultRingSize
	}
	if o.Threads <= 0 {
		o.Threads = 512
	}
	if o.Grace == 0 {
		o.Grace = time.Second
	}
	if o.TimeUnit <= 0 {
		o.TimeUnit = DefaultTimeUnit
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
}

// Run records the program until it and the processes it started have
// ended, and writes the trace.
func Run(opts Options) (*Result, error) {
	opts.defaults()
	if len(opts.Args) == 0 {
		return nil, errors.New("no program to run")
	}
	prog, err := CheckProgram(opts.Args[0])
	if err != nil {
		return nil, err
	}
	r, err := newRecorder(opts)
	if err != nil {
		return nil, err
	}
	defer r.srv.close()

	// The recorder adopts orphaned descendants, so it can learn how
	// they end.
	r.subreaper = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == nil
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(signals)

	if err := r.start(prog); err != nil {
		r.file.Close()
		os.Remove(r.file.Name())
		return nil, err
	}
	r.loop(signals)
	r.finish()
	res := r.result()
	if r.nprocs == 0 && r.writeErr == nil {
		// The trace holds nothing but its header: better no file than
		// one that looks like a recording of a program that allocated
		// nothing.
		os.Remove(res.Path)
		res.Path = ""
		return res, fmt.Errorf("%s: %w", opts.Args[0], ErrNotLoaded)
	}
	return res, nil
}

// ErrNotLoaded says that no process of the run ever connected: the
// program ran, but without the agent. Run returns it with the Result, so
// that the caller still knows how the program ended.
var ErrNotLoaded = errors.New("the agent was never loaded, so nothing was recorded and no trace was written " +
	"(the loader ignores LD_PRELOAD in setuid and setgid programs: is the program, or its script's interpreter, one?)")

// newRecorder creates the trace file, starts listening for agents and
// writes the trace's header: everything that can fail before the program
// runs.
func newRecorder(opts Options) (*Recorder, error) {
	out, tmp, err := createOutput(opts.Output)
	if err != nil {
		return nil, err
	}
	r := &Recorder{opts: opts, file: out, tmpName: tmp, byPid: map[int]*process{}, objects: map[string]uint64{},
		symbols: newSymbolTable(), log: opts.Log}
	rate := calibrate()
	r.coarse = coarseClockFor(opts.TimeUnit, rate)
	cfg := regionConfig{slots: opts.Threads, firstRing: opts.RingSize, ringSize: otherRing(opts.RingSize), nodeCap: 1 << 24, maxFrames: opts.MaxFrames,
		leakScan: opts.LeakScan, freePointers: opts.LeakScan && opts.LeakOrigins, fullUnwind: opts.FullUnwind}
	if opts.StackCalls {
		cfg.callsWindow = max(uint64(float64(opts.TimeUnit.Nanoseconds())/rate), 1)
	}
	r.srv, err = listen(cfg, r.coarse)
	if err == nil {
		host, _ := os.Hostname()
		r.clock = newClock(rate)
		r.w, err = trace.NewWriter(out, trace.Info{StartUnixNano: r.clock.start.UnixNano(), TimeUnit: uint64(opts.TimeUnit),
			Hostname: host, Recorder: opts.Version, MaxFrames: uint64(opts.MaxFrames), Command: opts.Args})
		if err != nil {
			r.srv.close()
			err = fmt.Errorf("starting the trace: %w", err)
		}
	}
	if err != nil {
		r.coarse.close()
		out.Close()
		os.Remove(out.Name())
		return nil, err
	}
	return r, nil
}

// start runs the program with the agent preloaded, names the trace after
// it if no name was given, and waits for it in the background.
func (r *Recorder) start(prog string) error {
	opts := r.opts
	started := time.Now()
	child, err := os.StartProcess(prog, opts.Args, &os.ProcAttr{
		Env:   agentEnv(os.Environ(), opts.AgentPath, r.srv.env(), !opts.LeaveOwnAllocator),
		Files: programFiles(opts.Stdin, opts.Stdout, opts.Stderr),
	})
	if err != nil {
		return fmt.Errorf("starting %s: %w", opts.Args[0], err)
	}
	r.mainPid = child.Pid
	r.path = r.file.Name()
	if r.tmpName {
		r.path = defaultName(opts.Args[0], child.Pid)
		if err := os.Rename(r.file.Name(), r.path); err != nil {
			r.path = r.file.Name()
		}
	}
	r.waits = make(chan waitResult, 1)
	go func() {
		// Only the program itself is waited for here: a wait for any
		// child would take the children of others in this process.
		state, err := child.Wait()
		r.runTime = time.Since(started)
		if err != nil {
			r.waits <- waitResult{child.Pid, 0, err}
			return
		}
		r.programCPU = state.UserTime() + state.SystemTime()
		r.waits <- waitResult{child.Pid, state.Sys().(syscall.WaitStatus), nil}
	}()
	return nil
}

func (r *Recorder) result() *Result {
	res := &Result{Path: r.path, Processes: int(r.nprocs), Events: r.events, Lost: r.lost, WriteErr: r.writeErr,
		ProgramCPU: r.programCPU, RecorderCPU: selfCPU(), RunTime: r.runTime,
		Allocations: r.allocations, Frees: r.frees, BytesAllocated: r.bytesAllocated,
		Waits: r.ringWaits, WaitTime: time.Duration(r.ringWaitNs), Program: endOf(r.mainStatus), Calls: r.calls,
		Unrecorded: r.unrecordedList, UnrecordedCount: r.unrecordedCount}
	if fi, err := os.Stat(r.path); err == nil {
		res.Bytes = fi.Size()
	}
	return res
}

type waitResult struct {
	pid    int
	status syscall.WaitStatus
	err    error
}

// selfCPU returns the CPU time memtrail has used so far.
func selfCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func endOf(ws syscall.WaitStatus) ProgramEnd {
	switch {
	case ws.Exited():
		return ProgramEnd{How: trace.EndExited, Code: int64(ws.ExitStatus())}
	case ws.Signaled():
		return ProgramEnd{How: trace.EndSignaled, Code: int64(ws.Signal())}
	}
	return ProgramEnd{How: trace.EndUnknown}
}

// loop drains the processes until the program has ended and its
// remaining descendants have ended or outlived the grace period.
func (r *Recorder) loop(signals <-chan os.Signal) {
	idle := 0
	var graceEnd time.Time
	for {
		busy := len(r.waiting) > 0
		r.connectLater()
		r.connectWaiting()
		for more := true; more; {
			select {
			case h := <-r.srv.hellos:
				r.connect(h)
				busy = true
			case wr := <-r.waits:
				r.reaped(wr)
				busy = true
			case sig := <-signals:
				if r.interrupted(sig) {
					return
				}
			case err := <-r.srv.errs:
				fmt.Fprintf(r.log, "memtrail: %v\n", err)
			default:
				more = false
			}
		}
		now := time.Now()
		r.clock.refine(now)
		for _, p := range r.procs {
			if !p.held && p.ready(now) && p.drain(r, false) > 0 {
				busy = true
			}
		}
		r.checkDeaths()
		if r.mainEnded {
			if graceEnd.IsZero() {
				graceEnd = time.Now().Add(r.opts.Grace)
			}
			// Processes connect before the program can end, except
			// those that exec'd at the very end. As subreaper the
			// recorder adopts every descendant left, so with no child
			// of its own alive none can come; where that cannot be
			// known (no subreaper, a kernel without children lists),
			// give them a moment.
			// (inFlight first: a hello is in the channel before the
			// count drops.)
			if r.srv.inFlight.Load() == 0 && len(r.srv.hellos) == 0 && len(r.waiting) == 0 && len(r.later) == 0 && len(r.procs) == 0 {
				if c := r.unheardChild(os.Getpid()); r.subreaper && c.known && !c.live && !c.ended {
					return
				}
				if time.Since(graceEnd.Add(-r.opts.Grace)) > 50*time.Millisecond {
					return
				}
			}
			if time.Now().After(graceEnd) {
				r.stopRemaining()
				return
			}
		}
		if busy {
			idle = 0
			continue
		}
		idle++
		time.Sleep(idleSleep(idle))
	}
}

// idleSleep backs off from 20µs to 2ms while nothing happens, so the
// recorder reacts quickly to bursts without burning a core when idle.
func idleSleep(idle int) time.Duration {
	d := 20 * time.Microsecond << min(idle/8, 7)
	return min(d, 2*time.Millisecond)
}

// interrupted handles a signal to memtrail. The program shares the
// terminal's process group and gets SIGINT and SIGQUIT itself; memtrail
// only forwards what was meant for it alone. Once the program has ended,
// any of them stops the recording of what is left.
func (r *Recorder) interrupted(sig os.Signal) bool {
	if r.mainEnded {
		r.stopRemaining()
		return true
	}
	if sig == syscall.SIGTERM || sig == syscall.SIGHUP {
		unix.Kill(r.mainPid, sig.(syscall.Signal))
	}
	return false
}

// connect starts recording a process that said hello, unless its hello
// must wait (see mustWait).
func (r *Recorder) connect(h *hello) {
	if r.mustWait(h, r.later) {
		r.later = append(r.later, h)
		return
	}
	r.begin(h)
}

// mustWait says whether hello h must wait for an image to be placed, given
// the hellos before it that still wait.
//
// A fork child may exec before its parent's history reaches the fork
// (the parent has not run since fork, or its record is still in its
// ring): its first image is then held (see begin), and ending it at once
// would start it without the fork that says which heap it inherited. So
// the new image's hello waits until the old one is placed (release). The
// hellos after a waiting one that name its pid, as their own or as their
// parent's, wait behind it: they are about the new image, which must be
// connected first.
func (r *Recorder) mustWait(h *hello, earlier []*hello) bool {
	for _, e := range earlier {
		if e.pid == h.pid || e.pid == h.ppid {
			return true
		}
	}
	old := r.byPid[h.pid]
	return !h.fork && old != nil && old.held && !old.ended
}

// connectLater connects the hellos that waited and may go on now, in
// order.
func (r *Recorder) connectLater() {
	for i := 0; i < len(r.later); {
		h := r.later[i]
		if r.mustWait(h, r.later[:i]) {
			i++
			continue
		}
		r.later = append(r.later[:i], r.later[i+1:]...)
		r.begin(h)
	}
}

// begin starts recording a process whose hello may be connected.
func (r *Recorder) begin(h *hello) {
	if old := r.byPid[h.pid]; old != nil && !old.ended && !h.fork {
		// The same pid with a new image: the old one exec'd. (The hello
		// came from that very process: see server.)
		r.end(old, trace.EndExec, 0)
	}
	parent := r.byPid[h.ppid]
	id, reserved := r.claimFork(h, parent)
	if !reserved {
		r.nprocs++
		id = r.nprocs
	}
	p := newProcess(id, h.pid, h.region)
	p.pidfd, p.gone, p.started = h.pidfd, h.gone, h.started
	p.start = trace.Process{ID: p.id, PID: uint64(h.pid), PPID: uint64(h.ppid),
		Time: r.clock.ns(h.tsc), Exe: h.exe, Args: h.args, Cwd: h.cwd}
	for _, o := range h.ownAlloc {
		msg := o.warning(!r.opts.LeaveOwnAllocator)
		p.warnings = append(p.warnings, msg)
		fmt.Fprintf(r.log, "memtrail: %s: %s\n", p, msg)
	}
	if p.patched = h.patched; p.patched {
		p.warnings = append(p.warnings, patchedWarning)
	}
	if parent != nil {
		p.start.Parent = parent.id
	}
	if r.opts.LeakScan && !h.fork {
		p.live = newLiveSet(r.opts.LeakOrigins) // a new image starts with an empty heap
	}
	r.procs = append(r.procs, p)
	r.byPid[h.pid] = p
	if !reserved && h.fork && h.forkToken != 0 && parent != nil && !parent.ended && parent.damaged == "" && parent.nextSeq < h.forkToken {
		p.held, p.parent, p.forkToken = true, parent, h.forkToken
		return
	}
	r.started(p)
}

// reservedFork is the place of a fork child that had not said hello when
// its parent's history ended: the Fork record was written with the id the
// child gets when it says hello.
type reservedFork struct {
	parent    *process
	token, id uint64
}

// claimFork returns the id reserved for the fork child that said hello h,
// if one was.
func (r *Recorder) claimFork(h *hello, parent *process) (uint64, bool) {
	if !h.fork || parent == nil {
		return 0, false
	}
	for i, rf := range r.reserved {
		if rf.parent == parent && rf.token == h.forkToken {
			r.reserved = append(r.reserved[:i], r.reserved[i+1:]...)
			return rf.id, true
		}
	}
	return 0, false
}

// started writes the start of p, and flushes it: whatever happens later,
// the trace says which processes ran.
func (r *Recorder) started(p *process) {
	r.write(r.w.ProcessStart(p.start))
	if p.patched {
		// Count 0: how many were missed is unknown, but the analysis must
		// know that some may have been, from the start (lostBeforeEnd).
		r.write(r.w.Lost(trace.Lost{Process: p.id, Reason: trace.LostOwnAllocator}))
	}
	for _, msg := range p.warnings {
		r.write(r.w.Warning(trace.Warning{Process: p.id, Message: msg}))
	}
	r.write(r.w.Flush())
}

// A fork's place in its parent's history waits for the child's hello
// (the parent itself runs on until its buffers fill). A child says hello
// before fork returns in it, so while the parent has a live child the
// recorder has not heard from, that child is on its way: a loaded machine
// can delay it by hundreds of milliseconds. With no such child the fork
// failed, or its child died at once, and the parent goes on at once.
// Where the kernel does not list children, the wait is bounded by
// forkHelloWait; a pending child is waited for up to forkChildWait (it
// may be unable to connect).
const (
	forkHelloWait = 3 * time.Second
	forkChildWait = 30 * time.Second
	forkEndedWait = 200 * time.Millisecond
	forkPoll      = 10 * time.Millisecond
)

// forked handles the parent's side of a fork at sequence token-1. It
// returns false while the child may still say hello.
func (r *Recorder) forked(parent *process, token, at uint64, final bool) bool {
	if r.placeFork(parent, token, at) {
		return true
	}
	// The child may have said hello, run and ended already (its parent
	// reaped it): its hello is then on its way, or waiting in the channel.
	r.forkHellos()
	if r.placeFork(parent, token, at) {
		return true
	}
	if final {
		// The parent has ended, and its history with it: if a child
		// may still say hello, keep its place.
		if c := r.unheardForkChild(parent); c.live || c.ended {
			r.nprocs++
			r.write(r.w.Fork(trace.Fork{Process: parent.id, Child: r.nprocs, Time: at}))
			r.reserved = append(r.reserved, reservedFork{parent: parent, token: token, id: r.nprocs})
		}
		parent.forkWait, parent.forkCheck = 0, 0
		return true
	}
	now := r.clock.now()
	if parent.forkWait == 0 {
		parent.forkWait = now
	}
	if parent.forkCheck != 0 && now-parent.forkCheck < uint64(forkPoll) {
		return false
	}
	parent.forkCheck = now
	limit := forkHelloWait
	switch c := r.unheardForkChild(parent); {
	case c.live:
		limit = forkChildWait
	case c.ended:
		// It may have said hello before it ended: the hello may still
		// be on its way through the socket.
		limit = forkEndedWait
	case c.known:
		limit = 0
	}
	if now-parent.forkWait < uint64(limit) {
		return false
	}
	// The child never said hello: it is not recorded (or died at once).
	parent.forkWait, parent.forkCheck = 0, 0
	return true
}

// placeFork writes the Fork record of the fork at token of parent and
// starts the child, if the child has said hello.
func (r *Recorder) placeFork(parent *process, token, at uint64) bool {
	for _, c := range r.procs {
		if c.held && c.parent == parent && c.forkToken == token {
			r.write(r.w.Fork(trace.Fork{Process: parent.id, Child: c.id, Time: at}))
			if parent.live != nil {
				c.live = parent.live.clone() // the child's heap is a copy of its parent's now
			}
			r.release(c)
			parent.forkWait, parent.forkCheck = 0, 0
			return true
		}
	}
	return false
}

// connectPending connects every hello that has come, waiting briefly for
// those in flight.
func (r *Recorder) connectPending() {
	r.collectHellos()
	r.connectLater()
	r.connectWaiting()
}

// connectWaiting connects the hellos in r.waiting, in order. Each leaves
// r.waiting before it is connected: connecting one may drain a process,
// and take more hellos there (forkHellos).
func (r *Recorder) connectWaiting() {
	for len(r.waiting) > 0 {
		h := r.waiting[0]
		r.waiting = r.waiting[1:]
		r.connect(h)
	}
}

// collectHellos waits, at most a second, until the server has put every
// hello it accepted in its channel, and moves them to r.waiting.
func (r *Recorder) collectHellos() {
	deadline := time.Now().Add(time.Second)
	for r.srv.inFlight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Microsecond)
	}
	for {
		select {
		case h := <-r.srv.hellos:
			r.waiting = append(r.waiting, h)
		default:
			return
		}
	}
}

// forkHellos connects the fork children whose hellos have come; the
// other hellos stay in r.waiting for the loop, which connects them first
// (an exec's hello ends the old image, which may be the process being
// drained), and so do the fork hellos that name the pid of one that
// stays: a child forked by the new image.
func (r *Recorder) forkHellos() {
	r.collectHellos()
	var rest []*hello
	for len(r.waiting) > 0 {
		h := r.waiting[0]
		r.waiting = r.waiting[1:]
		if h.fork && !r.mustWait(h, rest) {
			r.connect(h)
		} else {
			rest = append(rest, h)
		}
	}
	r.waiting = append(rest, r.waiting...)
}

// unheardForkChild looks for fork children of p that have not said hello:
// children of its own or, once it has ended, children the recorder
// adopted when it did.
func (r *Recorder) unheardForkChild(p *process) unheard {
	c := r.unheardChild(p.pid)
	if fields, ok := statFields(p.pid); ok && !zombie(fields) {
		return c
	}
	adopted := r.unheardChild(os.Getpid())
	return unheard{known: adopted.known, live: c.live || adopted.live, ended: c.ended || adopted.ended}
}

// unheard says what the kernel lists of a process's children that have
// not said hello (or whose process has ended since).
type unheard struct {
	known bool // false if the kernel does not list children
	live  bool // one of them is alive
	ended bool // one of them has ended and waits to be reaped
}

// unheardChild looks for children of process pid that the recorder has not
// heard from, in the children the kernel lists for each of its threads.
func (r *Recorder) unheardChild(pid int) unheard {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return unheard{}
	}
	u := unheard{known: true}
	for _, t := range tasks {
		list, err := os.ReadFile(filepath.Join(dir, t.Name(), "children"))
		if err != nil {
			if _, e := os.Stat(filepath.Join(dir, t.Name())); e == nil && os.IsNotExist(err) {
				return unheard{} // a kernel without children lists
			}
			continue // the thread ended
		}
		for _, f := range strings.Fields(string(list)) {
			child, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			heard := r.byPid[child]
			if heard != nil && !heard.ended {
				continue
			}
			fields, ok := statFields(child)
			switch {
			case !ok: // reaped since
			case zombie(fields):
				// A process heard from that has ended, or one that
				// may have said hello before it ended.
				u.ended = u.ended || heard == nil
			default:
				u.live = true // (a pid reused after an ended process)
			}
		}
	}
	return u
}

// zombie reports whether the statFields of a process are those of one
// that has ended and waits to be reaped.
func zombie(fields []string) bool {
	return len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}

// release starts c, held until now. If it has exec'd, the hello of its
// new image may go on now, and ends it (connectLater).
func (r *Recorder) release(c *process) {
	c.held = false
	r.started(c)
}

// checkDeaths ends the processes whose pidfd says they have exited, and
// those without one that /proc says have (every watchEvery at most).
func (r *Recorder) checkDeaths() {
	if len(r.procs) == 0 {
		return
	}
	fds := make([]unix.PollFd, 0, len(r.procs))
	for _, p := range r.procs {
		fds = append(fds, unix.PollFd{Fd: int32(p.pidfd), Events: unix.POLLIN}) // -1: no events
	}
	n, err := unix.Poll(fds, 0)
	if err != nil {
		return
	}
	var dead []*process
	watch, known := false, false // known: whether watch was worked out
	for i, p := range r.procs {
		ended := n > 0 && fds[i].Revents != 0 || p.gone
		if !ended && p.pidfd < 0 {
			if !known {
				watch, known = r.watchDue(), true
			}
			ended = watch && procEnded(p.pid, p.started)
		}
		// A held fork child ends once its parent has placed its start.
		if ended && !p.held {
			dead = append(dead, p)
		}
	}
	if len(dead) > 0 {
		// A dead pid that exec'd may have said hello as its new image:
		// then its old image ended by the exec.
		r.connectPending()
	}
	for _, p := range dead {
		if p.ended {
			continue
		}
		// What it published last (an exit) may say how it ended.
		p.drain(r, true)
		how, code := r.howEnded(p)
		if p.damaged == "" && p.region.load64(hdrExecPending) != 0 {
			// It exec'd, and the new image never said hello. (A
			// damaged region may say anything.)
			how, code = trace.EndExecUnrecorded, r.unrecorded(p)
		}
		r.end(p, how, code)
	}
}

// String names p in messages, by pid and program, as "process 12
// (/usr/bin/prog)".
func (p *process) String() string {
	return fmt.Sprintf("process %d (%s)", p.pid, shown(p.start.Exe))
}

// shown is a path as a message shows it: quoted if it holds anything but
// printable characters, so that a file name cannot forge a line of its
// own.
func shown(path string) string {
	for _, c := range path {
		if !strconv.IsGraphic(c) || c == '"' {
			return strconv.QuoteToGraphic(path)
		}
	}
	return path
}

// maxUnrecordedListed bounds Result.Unrecorded: a script may exec
// thousands of static programs.
const maxUnrecordedListed = 100

// unrecorded says that p exec'd a program the agent was not loaded into,
// and why if the agent knew, and returns the ProcessEnd code that says
// why (trace.EndExecUnrecorded).
func (r *Recorder) unrecorded(p *process) int64 {
	u := Unrecorded{PID: p.pid, Exe: p.start.Exe}
	code := trace.UnrecordedUnknown
	if p.region.load64(hdrExecPending) == execStatic {
		u.Program, u.Static = p.region.execPath(), true
		code = trace.UnrecordedStatic
		fmt.Fprintf(r.log, "memtrail: %s exec'd %s, which is statically linked (or its script's interpreter is): "+
			"the loader cannot preload memtrail into it, so it was not recorded\n", p, shown(u.Program))
	} else {
		fmt.Fprintf(r.log, "memtrail: %s exec'd a program without memtrail, which was not recorded "+
			"(a setuid or setgid program, for which the loader ignores LD_PRELOAD)\n", p)
	}
	r.listUnrecorded(u)
	return code
}

func (r *Recorder) listUnrecorded(u Unrecorded) {
	r.unrecordedCount++
	if len(r.unrecordedList) < maxUnrecordedListed {
		r.unrecordedList = append(r.unrecordedList, u)
	}
}

// spawned handles a SPAWN record w of p: p started a child with
// posix_spawn, or vfork and exec, that runs a statically linked program.
// The child never says hello, so the trace holds what the recorder knows
// of it: a process, a copy of p as fork makes, that ended at once by that
// exec (posix_spawn and vfork return once the child has exec'd), with no
// heap of its own. It is kept out of byPid: a process that later says
// hello under its pid is a new image of its own (the static program
// exec'd a dynamic one).
func (r *Recorder) spawned(p *process, w []uint64) bool {
	n := w[4]
	b, ok := recordBytes(w[5:], n)
	if n >= execPathBytes || !ok {
		p.damage(fmt.Sprintf("a spawn record of %d words names a path of %d bytes", len(w), n))
		return false
	}
	r.nprocs++
	at := r.clock.ns(w[2])
	pid := int(uint32(w[3]))
	c := trace.Process{ID: r.nprocs, PID: uint64(pid), PPID: uint64(p.pid), Parent: p.id, Time: at,
		Exe: p.start.Exe, Args: p.start.Args, Cwd: p.start.Cwd}
	r.write(r.w.ProcessStart(c))
	r.write(r.w.ProcessEnd(trace.ProcessEnd{ID: c.ID, Time: at, How: trace.EndExecUnrecorded, Code: trace.UnrecordedStatic}))
	u := Unrecorded{PID: pid, Exe: p.start.Exe, Program: string(b), Static: true}
	fmt.Fprintf(r.log, "memtrail: process %d (%s), spawned by %s, runs %s, which is statically linked (or its script's interpreter is): "+
		"the loader cannot preload memtrail into it, so it was not recorded\n", pid, shown(u.Exe), p, shown(u.Program))
	r.listUnrecorded(u)
	return true
}

// howEnded finds out how a dead process ended: from its wait status if it
// was the recorder's child, else from /proc while it is a zombie, else
// from its pidfd once reaped, else from the exit it announced.
func (r *Recorder) howEnded(p *process) (trace.EndHow, int64) {
	if p.pid == r.mainPid && !r.mainEnded {
		// Its status is on its way from the reaper.
		timeout := time.After(time.Second)
	wait:
		for !r.mainEnded {
			select {
			case wr := <-r.waits:
				r.reaped(wr)
			case <-timeout:
				break wait
			}
		}
	}
	if p.pid == r.mainPid && r.mainStatusKnown {
		e := endOf(r.mainStatus)
		return e.How, e.Code
	}
	// An orphan the recorder adopted as subreaper: reap it.
	var ws unix.WaitStatus
	if pid, err := unix.Wait4(p.pid, &ws, unix.WNOHANG, nil); err == nil && pid == p.pid {
		e := endOf(syscall.WaitStatus(ws))
		return e.How, e.Code
	}
	if code, ok := zombieStatus(p.pid); ok {
		e := endOf(code)
		return e.How, e.Code
	}
	if ws, ok := pidfdExit(p.pidfd); ok {
		e := endOf(ws)
		return e.How, e.Code
	}
	if p.exited {
		return trace.EndExited, p.exitCode
	}
	return trace.EndUnknown, 0
}

func (r *Recorder) reaped(wr waitResult) {
	r.mainEnded = true
	if wr.err != nil {
		fmt.Fprintf(r.log, "memtrail: waiting for the program, process %d (%s): %v\n", wr.pid, shown(r.opts.Args[0]), wr.err)
		return
	}
	r.mainStatus = wr.status
	r.mainStatusKnown = true
}

// watchEvery is how often the processes without a pidfd are looked up in
// /proc: a read of /proc/pid/stat each, against a poll of all pidfds at
// every turn of the loop.
const watchEvery = 5 * time.Millisecond

// watchDue reports whether the processes without a pidfd are due to be
// looked up in /proc, and if so, starts the next watchEvery.
func (r *Recorder) watchDue() bool {
	now := time.Now()
	if now.Sub(r.watched) < watchEvery {
		return false
	}
	r.watched = now
	return true
}

// startTime returns when process pid started, which tells it from a
// later process given the same pid; false if it has ended.
func startTime(pid int) (uint64, bool) {
	fields, ok := statFields(pid)
	if !ok || zombie(fields) {
		return 0, false
	}
	return startOf(fields)
}

// startOf reads the start time (field 22, in clock ticks since boot) from
// the fields of /proc/pid/stat that statFields returns.
func startOf(fields []string) (uint64, bool) {
	if len(fields) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(fields[19], 10, 64)
	return v, err == nil
}

// procEnded reports whether the process pid that started at start has
// ended: it is gone, its pid is another process's, or it is a zombie. A
// zombie main thread whose process has other threads (it called
// pthread_exit) is no end: num_threads, field 20, counts them.
func procEnded(pid int, start uint64) bool {
	fields, ok := statFields(pid)
	if !ok {
		return true
	}
	if zombie(fields) {
		if len(fields) < 18 {
			return true
		}
		threads, err := strconv.Atoi(fields[17])
		return err != nil || threads <= 1
	}
	v, ok := startOf(fields)
	return !ok || v != start
}

// zombieStatus reads the exit status of a process its parent has not
// reaped yet (field 52 of /proc/pid/stat).
func zombieStatus(pid int) (syscall.WaitStatus, bool) {
	fields, ok := statFields(pid)
	// exit_code is field 52.
	if !ok || len(fields) < 50 || fields[0] != "Z" {
		return 0, false
	}
	v, err := strconv.Atoi(fields[49])
	if err != nil {
		return 0, false
	}
	return syscall.WaitStatus(v), true
}

// statFields returns the fields of /proc/pid/stat from field 3 (the
// state) on: those after the command name, which may hold anything.
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(b[i+1:])), true
}

// end drains what is left of a process and writes how it ended.
func (r *Recorder) end(p *process, how trace.EndHow, code int64) {
	if p.ended {
		return
	}
	if p.held {
		r.release(p)
	}
	p.drain(r, true)
	for _, c := range r.procs {
		// Children whose fork never showed in this process's history.
		if c.held && c.parent == p {
			r.release(c)
		}
	}
	hdr := p.region
	// The agent's counters, each read once: a program that damaged the
	// region may have written anything there.
	issued, dropped := hdr.load64(hdrSeq), hdr.load64(hdrDropped)
	if p.damaged == "" && issued < p.nextSeq {
		p.damage(fmt.Sprintf("the agent says it handed out %d sequence numbers, and the recorder has handled %d", issued, p.nextSeq))
		r.damaged(p)
	}
	if p.damaged != "" {
		// What is not known is not counted: the Lost record says the
		// process's history stops at the damage.
		p.lost, dropped = 0, 0
		if issued >= p.nextSeq && issued-p.nextSeq <= maxDamageLost {
			p.lost = issued - p.nextSeq
		}
		r.write(r.w.Lost(trace.Lost{Process: p.id, Count: p.lost, Reason: trace.LostRegionDamaged + ": " + p.damaged}))
	} else {
		p.lost += issued - p.nextSeq
		if p.lost > 0 {
			r.write(r.w.Lost(trace.Lost{Process: p.id, Count: p.lost, Reason: trace.LostInFlight}))
		}
		if dropped > 0 {
			r.write(r.w.Lost(trace.Lost{Process: p.id, Count: dropped, Reason: "events the agent could not record (more live threads than slots, the recorder gone, or allocations in a signal handler that interrupted the agent)"}))
		}
		if n := hdr.load64(hdrNodesLost); n > 0 {
			fmt.Fprintf(r.log, "memtrail: %s: %d call stacks were cut short (node table full)\n", p, n)
		}
		r.ringWaits += hdr.load64(hdrWaits)
		r.ringWaitNs += hdr.load64(hdrWaitNs)
	}
	r.lost += p.lost + dropped
	r.write(r.w.ProcessEnd(trace.ProcessEnd{ID: p.id, Time: r.clock.now(), How: how, Code: code, Lost: p.lost + dropped}))
	p.ended = true
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
	}
	// The process may run on (it outlived the program, or an image that
	// said it had exec'd had not): its agent must not wait for ring space
	// no one will give.
	*hdr.u64(hdrDisabled) = 1
	hdr.unmap()
	for i, q := range r.procs {
		if q == p {
			r.procs = append(r.procs[:i], r.procs[i+1:]...)
			break
		}
	}
}

// maxDamageLost bounds the count of operations a damaged process is said
// to have lost (its sequence counter, read from the region, may be
// anything): more than any process makes in a run.
const maxDamageLost = 1 << 40

// damaged acts on the damage p.damage found, once: it says so, and lets
// go the fork children held for a place in p's history, which will not
// be read any further.
func (r *Recorder) damaged(p *process) {
	if p.damageTold {
		return
	}
	p.damageTold = true
	fmt.Fprintf(r.log, "memtrail: %s damaged memtrail's buffer in its memory (%s); its recording stops here, "+
		"the program runs on\n", p, p.damaged)
	for _, c := range r.procs {
		if c.held && c.parent == p {
			r.release(c)
		}
	}
}

// stopRemaining stops recording processes that outlive the program.
func (r *Recorder) stopRemaining() {
	for {
		r.connectLater() // a new image whose hello waited runs too
		if len(r.procs) == 0 {
			return
		}
		p := r.procs[0]
		*p.region.u64(hdrDisabled) = 1 // before the last drain, so that it is the last
		fmt.Fprintf(r.log, "memtrail: %s is still running; its recording stops here\n", p)
		r.end(p, trace.EndRunning, 0)
	}
}

// newEvent starts the next memory event in r.ev, which is reused: an
// Event built on the stack and passed by value is copied with 16-byte
// loads right after its 8-byte fields were stored, and each such copy
// stalls on store forwarding (it was a tenth of the recorder's time).
func (r *Recorder) newEvent(kind trace.Kind, api trace.API, tsc, stack uint64) *trace.Event {
	r.ev = trace.Event{Kind: kind, API: api, Time: r.clock.ns(tsc), Stack: stack}
	return &r.ev
}

// event writes a memory event of process p, made by the slot's thread.
func (r *Recorder) event(p *process, s *slotReader, ev *trace.Event) {
	r.writeEvents(p, s, unsafe.Slice(ev, 1))
}

// runEvents is how many events of a run process.run writes at once: each
// call to writeEvents costs about as much as the work of an event on its way
// to the trace (BenchmarkDrain), and 64 of them fit in 5 KiB.
const runEvents = 64

// writeEvents writes memory events of process p, made by the slot's thread,
// in order: they go to the live set one after the other, then to the
// trace, in one call.
func (r *Recorder) writeEvents(p *process, s *slotReader, evs []trace.Event) {
	live := p.live
	for i := range evs {
		ev := &evs[i]
		ev.Process = p.id
		ev.Thread = s.thread
		switch ev.Kind {
		case trace.KindAlloc:
			r.allocations++
			r.bytesAllocated += ev.Size
			if live != nil {
				live.add(ev.Addr, ev.Size)
			}
		case trace.KindFree:
			r.frees++
			if live != nil {
				live.remove(ev.Addr)
			}
		case trace.KindRealloc:
			r.allocations++
			r.frees++
			r.bytesAllocated += ev.Size
			if live != nil {
				live.apply(ev)
			}
		}
	}
	r.events += uint64(len(evs))
	p.events += uint64(len(evs))
	r.write(r.w.Events(evs))
}

// write notes the first error writing the trace. After it, the agents are
// told to stop: nothing more could be kept. (It is called at every event:
// the check is inlined, the rest is not.)
func (r *Recorder) write(err error) {
	if err != nil && r.writeErr == nil {
		r.writeFailed(err)
	}
}

func (r *Recorder) writeFailed(err error) {
	r.writeErr = err
	for _, p := range r.procs {
		*p.region.u64(hdrDisabled) = 1
	}
	fmt.Fprintf(r.log, "memtrail: writing the trace failed: %v; recording stopped, the program continues\n", err)
}

// module writes a module and, the first time it is seen, its object.
func (r *Recorder) module(p *process, w []uint64) bool {
	m, ok := parseModule(w)
	if !ok {
		p.damage(fmt.Sprintf("a module record of %d words does not hold what it says", len(w)))
		return false
	}
	if m.path == "" && len(m.segments) > 0 {
		m.path = mappedPath(p.pid, m.base+m.segments[0].Vaddr)
	}
	key := m.path + "\x00" + string(m.buildID)
	obj, seen := r.objects[key]
	if !seen {
		obj = uint64(len(r.objects) + 1)
		r.objects[key] = obj
		r.write(r.w.Object(trace.Object{ID: obj, Path: m.path, BuildID: m.buildID}))
		r.symbols.addObject(obj, m.path, m.buildID)
	}
	p.modules[uint32(m.id)] = obj
	if r.programObject(p, m.path) {
		r.symbols.wantTypes(obj)
	}
	r.write(r.w.Module(trace.Module{Process: p.id, ID: m.id, Object: obj, Base: m.base, Time: r.clock.ns(m.tsc), Segments: m.segments}))
	return true
}

// mappedPath returns the file mapped at addr in process pid, or "": the
// agent sends no path too long for a record, and the file is then found
// in the process's maps (if it has not unloaded it meanwhile).
func mappedPath(pid int, addr uint64) string {
	ms, err := readMaps(pid)
	if err != nil {
		return ""
	}
	for _, m := range ms {
		if addr >= m.start && addr < m.end && m.isFile() {
			return strings.TrimSuffix(m.path, " (deleted)")
		}
	}
	return ""
}

func (r *Recorder) wantSymbol(obj, offset uint64) { r.symbols.want(obj, offset) }

// programObject reports whether the object at path, mapped into p, is the
// program's own: its executable, or a library that is neither one of the
// system's (see isSystemLibrary) nor memtrail's agent.
func (r *Recorder) programObject(p *process, path string) bool {
	return path == p.start.Exe || path != r.opts.AgentPath && !isSystemLibrary(path)
}

// finish symbolizes, completes the trace and closes the file.
func (r *Recorder) finish() {
	if r.writeErr == nil {
		r.symbols.write(r.w, r.write)
		r.write(r.w.Close())
	}
	r.symbols.close()
	r.coarse.close()
	if err := r.file.Close(); err != nil {
		r.write(err)
	}
}
