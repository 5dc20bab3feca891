package record

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/memtrail/memtrail/internal/trace"
)

// slotReader reads the ring of one thread slot.
type slotReader struct {
	proc     *process
	index    int
	ring     []uint64
	mask     uint64
	pos      uint64 // bytes consumed
	written  uint64 // the agent's write position, as last loaded
	released uint64 // the read position the agent was last told
	thread   uint64 // trace index of the thread owning the slot
	tid      uint64 // and its thread id
	active   bool
	// head is the next record, copied out of the ring (to scratch) or
	// in the backlog: never read in place, since the program can change
	// the ring between the recorder's checks and its use of a record.
	head    []uint64
	inRing  bool // head is a copy of the record at pos
	scratch []uint64
	due     uint64 // the sequence number at which head is to be handled
	parked  bool   // head is a realloc whose release number has passed
	// sameTsc and sameUse are the time and stack in use of the latest
	// whole ALLOC or FREE record handled (haveSame: since the slot's
	// thread attached), which an ALLOC_SAME or FREE_SAME repeats.
	sameTsc, sameUse uint64
	haveSame         bool

	// backlog holds records copied out of the ring before their turn came
	// (see spill), from backlog[bi] on. They come before those still in
	// the ring.
	backlog []uint64
	bi      int
	// pointers are the words of POINTERS records that came before the
	// FREE record of block pointersOf (-leak-origins): what did not fit in
	// the FREE record.
	pointers   []uint64
	pointersOf uint64

	// spent is set by a spill and cleared once the ring is found less
	// than a quarter full: a ring that is half full again first means the
	// program outpaces the recorder for good, not a burst (see spillFull).
	spent bool
}

// parkedRealloc is a realloc whose old block was released (its first
// sequence number passed) while its new block's number is still to come.
type parkedRealloc struct {
	slot  *slotReader
	split bool // the old block was already written out as a free
}

// process is one recorded program image.
type process struct {
	id        uint64
	pid       int
	warnings  []string // what it does that is not recorded, written after its start
	patched   bool     // recorded through the program's own allocator, patched (see trace.LostOwnAllocator)
	region    *region
	pidfd     int
	slots     []slotReader
	active    []*slotReader
	last      *slotReader
	nextSeq   uint64
	threads   map[uint64]uint64 // tid → thread index
	nodes     []uint64          // bitset of stack nodes written
	modules   map[uint32]uint64 // agent module id → trace object id
	parked    []*parkedRealloc
	chain     []trace.StackNode
	rescanned time.Time // when the slots were last looked over
	drained   time.Time // when drain last ran
	exited    bool      // the agent saw exit() with exitCode
	exitCode  int64
	lost      uint64
	ended     bool
	gone      bool // its pidfd could not be opened: it had already exited
	// started is when it started (/proc/pid/stat's starttime), for one
	// watched through /proc for want of a pidfd (see procEnded).
	started uint64
	events  uint64
	// damaged says why the process's region can no longer be trusted
	// (see damage); "" while it can. damageTold is set once the recorder
	// has acted on it.
	damaged    string
	damageTold bool
	// stallSeq is the sequence number the recorder has waited for since
	// stallSince while a thread of the process waited for ring space.
	stallSeq   uint64
	stallSince time.Time
	// live is the set of the process's blocks, for its leak scan at
	// exit; nil when leak scans are off, or when the process's heap is
	// not known from its start (a fork child the recorder could not
	// place in its parent's history).
	live *liveSet

	// A fork child is held back until its parent's history reaches the
	// fork, so that the trace says which of the parent's blocks it starts
	// with before it says anything about the child.
	held      bool
	parent    *process
	forkToken uint64
	start     trace.Process
	forkWait  uint64 // when the parent began waiting for a child's hello
	forkCheck uint64 // when it last looked for a child that has not said hello
}

func newProcess(id uint64, pid int, r *region) *process {
	p := &process{id: id, pid: pid, region: r, pidfd: -1, nextSeq: 0,
		threads: map[uint64]uint64{}, modules: map[uint32]uint64{}}
	p.slots = make([]slotReader, r.nslots)
	for i := range p.slots {
		s := &p.slots[i]
		s.proc = p
		s.index = i
		s.ring = r.ring(i)
		s.mask = uint64(len(s.ring) - 1)
	}
	return p
}

// fill makes the slot's next record its head, if one has been published.
func (s *slotReader) fill(r *region) bool {
	if s.head != nil {
		return true
	}
	if s.bi < len(s.backlog) {
		n := int(s.backlog[s.bi]>>8) & 0xff
		if n < 2 || s.bi+n > len(s.backlog) {
			// spill copies what the agent published; a record it
			// never writes means the ring was damaged.
			s.proc.damage(fmt.Sprintf("thread slot %d holds a record of %d words", s.index, n))
			return false
		}
		s.head = s.backlog[s.bi : s.bi+n : s.bi+n]
		s.inRing = false
		s.due = s.head[1]
		s.parked = false
		return true
	}
	if s.pos == s.written && !s.loadWritten(r) {
		return false
	}
	if s.pos == s.written {
		return false
	}
	w0 := s.ring[(s.pos/8)&s.mask]
	n := int(w0>>8) & 0xff
	if n < 2 || s.pos+uint64(n)*8 > s.written {
		// A record the agent never writes: the ring is damaged.
		s.proc.damage(fmt.Sprintf("thread slot %d holds a record of %d words at byte %d, of %d published", s.index, n, s.pos, s.written))
		return false
	}
	if s.scratch == nil {
		s.scratch = make([]uint64, 0xff) // the longest record
	}
	h := s.scratch[:n:n]
	at := s.pos / 8 & s.mask
	if at+uint64(n) <= uint64(len(s.ring)) {
		// Most records are frees and allocations: copied a word at a
		// time, they cost a few moves. (The compiler makes a call to
		// memmove of a copy of arrays of their length.)
		switch src := s.ring[at : at+uint64(n)]; n {
		case 5:
			src, h := src[:5:5], h[:5:5]
			h[0], h[1], h[2], h[3], h[4] = src[0], src[1], src[2], src[3], src[4]
		case 6:
			src, h := src[:6:6], h[:6:6]
			h[0], h[1], h[2], h[3], h[4], h[5] = src[0], src[1], src[2], src[3], src[4], src[5]
		default:
			copy(h, src)
		}
	} else {
		for i := range h {
			h[i] = s.ring[(at+uint64(i))&s.mask]
		}
	}
	s.head = h
	s.inRing = true
	s.due = s.head[1]
	s.parked = false
	return true
}

// loadWritten loads the agent's write position. It reports false, and
// gives up on the process's region, if the position is not one the agent
// can have written: behind the recorder's, or more than a ring ahead.
func (s *slotReader) loadWritten(r *region) bool {
	w := r.load64(r.slotOff(s.index) + slotWrite)
	if w-s.pos > uint64(len(s.ring))*8 {
		s.proc.damage(fmt.Sprintf("thread slot %d says %d bytes were written, the recorder has read %d of a ring of %d", s.index, w, s.pos, len(s.ring)*8))
		return false
	}
	s.written = w
	return true
}

// consume drops the head. Its space goes back to the agent in batches of
// half the ring (see release): the agent only looks at the read position
// when its ring seems full, every store would move the cache line between
// cores, and each one wakes a thread waiting for space, which then takes
// the CPU from the recorder. (With quarters, the 8-thread loop of bench/
// took 1.42 s rather than 1.33, and its threads waited 6,400 times rather
// than 3,800.)
func (s *slotReader) consume(r *region) {
	if !s.inRing {
		n := len(s.head)
		s.head = nil
		s.dropBacklog(n)
		return
	}
	s.pos += uint64(len(s.head)) * 8
	s.head = nil
	if s.pos-s.released >= uint64(len(s.ring))*4 { // half the ring, in bytes
		s.release(r)
	}
}

// dropBacklog drops the first words of the backlog, handled.
func (s *slotReader) dropBacklog(words int) {
	s.bi += words
	if s.bi == len(s.backlog) {
		s.backlog, s.bi = s.backlog[:0], 0
	} else if s.bi >= 1<<16 && s.bi >= len(s.backlog)/2 {
		s.backlog = s.backlog[:copy(s.backlog, s.backlog[s.bi:])]
		s.bi = 0
	}
}

// held returns how many bytes the agent has published in the ring that
// are not taken out of it yet.
func (s *slotReader) held(r *region) uint64 {
	if !s.loadWritten(r) {
		return 0
	}
	return s.written - s.pos
}

// pending returns how many words of records the slot holds out of the
// ring, its head included.
func (s *slotReader) pending() int { return len(s.backlog) - s.bi }

// spill copies every record the agent has published in the ring and the
// recorder has not handled into the backlog, and hands their space back
// at once: the agent goes on writing while the recorder works through a
// burst of allocations in its own memory, rather than the program's.
// It returns how many words it copied.
func (s *slotReader) spill(r *region) int {
	if !s.loadWritten(r) {
		return 0
	}
	words := int((s.written - s.pos) / 8)
	if words == 0 {
		return 0
	}
	from := len(s.backlog)
	at := int(s.pos/8) & int(s.mask)
	first := min(words, len(s.ring)-at)
	s.backlog = append(s.backlog, s.ring[at:at+first]...)
	s.backlog = append(s.backlog, s.ring[:words-first]...)
	if s.head != nil && s.inRing {
		// The head is the record at pos: it is now the first copied,
		// as it was when it was checked (the ring may have changed).
		n := len(s.head)
		copy(s.backlog[from:], s.head)
		s.head = s.backlog[from : from+n : from+n]
		s.inRing = false
	}
	s.pos = s.written
	s.release(r)
	return words
}

// release hands the space of consumed records back to the agent.
func (s *slotReader) release(r *region) {
	if s.released != s.pos {
		s.released = s.pos
		atomic.StoreUint64(r.u64(r.slotOff(s.index)+slotRead), s.pos)
		if atomic.LoadUint32(r.u32(r.slotOff(s.index)+slotWaiting)) != 0 {
			r.wake(r.slotOff(s.index)+slotRead, 1) // the thread sleeps on its low half
		}
	}
}

// rescan finds slots that hold data or an owner and frees the slots of
// exited threads once they are drained.
func (p *process) rescan() {
	r := p.region
	p.active = p.active[:0]
	for i := range p.slots {
		s := &p.slots[i]
		state := atomic.LoadUint32(r.u32(r.slotOff(i) + slotState))
		if state == slotFree && !s.active {
			continue
		}
		if !s.loadWritten(r) {
			return
		}
		drained := s.head == nil && s.pos == s.written && s.pending() == 0
		if state == slotDone && drained {
			atomic.CompareAndSwapUint32(r.u32(r.slotOff(i)+slotState), slotDone, slotFree)
			s.active = false
			continue
		}
		if state == slotFree && drained {
			s.active = false
			continue
		}
		s.active = true
		p.active = append(p.active, s)
	}
}

// next returns the slot whose head is due now, or nil. The slots are
// looked over again (rescan) when no known one has it — a thread new to
// the recorder — but at most every millisecond: when the recorder has
// caught up, nothing is due, and looking at every slot each time would be
// most of its work.
func (p *process) next(final bool) *slotReader {
	if s := p.last; s != nil && s.fill(p.region) && s.due == p.nextSeq {
		return s
	}
	for pass := 0; pass < 2; pass++ {
		for _, s := range p.active {
			if s.fill(p.region) && s.due == p.nextSeq {
				p.last = s
				return s
			}
		}
		if p.damaged != "" || !p.seqsPossible() {
			return nil
		}
		now := time.Now()
		if !final && now.Sub(p.rescanned) < time.Millisecond {
			return nil
		}
		p.rescanned = now
		p.rescan()
	}
	return nil
}

// seqsPossible checks the sequence numbers of the slots' heads when none
// is due: one that has passed, or that the agent has not handed out yet,
// is not the agent's, and would hold the slot up for good (and with it,
// once its ring is full, the thread). It gives up on the region and
// reports false if it finds one.
func (p *process) seqsPossible() bool {
	issued := p.region.load64(hdrSeq) // after the heads: the agent takes a number before it writes its record
	for _, s := range p.active {
		if s.head == nil {
			continue
		}
		if s.due < p.nextSeq || s.due >= issued {
			p.damage(fmt.Sprintf("thread slot %d holds a record of sequence number %d, when the next is %d and %d were handed out", s.index, s.due, p.nextSeq, issued))
			return false
		}
	}
	return true
}

// skipHole moves past a sequence number that will never come (its
// operation was cut short by the process's death). It reports false when
// no record is left at all.
func (p *process) skipHole() bool {
	if p.damaged != "" || !p.seqsPossible() {
		return false
	}
	lowest, found := uint64(0), false
	for _, s := range p.active {
		if s.fill(p.region) && (!found || s.due < lowest) {
			lowest, found = s.due, true
		}
	}
	if !found {
		return false
	}
	p.lost += lowest - p.nextSeq
	p.nextSeq = lowest
	return true
}

// Batches. The recorder lets records pile up in a ring before it reads
// them: a cache line the agent is still filling moves between the cores
// at each read, and the agent then waits for it to come back, which
// costs the program more than the whole rest of recording an event
// (bench/workloads/ringcost.c: 175 ns against 51 per record). A process is
// drained once a ring holds batchBytes, or batchDelay after the last
// drain.
const (
	batchBytes = 16 << 10
	batchDelay = 200 * time.Microsecond
)

// ready reports whether p's records should be drained now.
func (p *process) ready(now time.Time) bool {
	if now.Sub(p.drained) >= batchDelay {
		return true
	}
	for _, s := range p.active {
		if s.pending() > 0 || s.held(p.region) >= batchBytes {
			return true
		}
	}
	return false
}

// Spills. While the recorder handles a burst of records, a ring that
// fills makes the program wait for it. Programs allocate in bursts
// (python3 building objects, jq parsing), and the recorder catches up in
// between: so once a ring is half full, what it holds is copied to the
// recorder's memory (spill), up to maxBacklog a process. The rings, which
// count in the program's memory, stay small. Measured here (medians of 4
// runs, rings of 256 KiB), spills took python3's wall time (bench/) from
// 1.30 to 1.23 s and jq's from 1.34 to 1.23 s. A bigger ring does more
// (1 MiB: 0.93 and 1.11 s), as spills only happen while the recorder
// runs: it sleeps about a millisecond when it finds nothing to do, and
// shares two CPUs with the program and its own goroutines. Hence the
// 1 MiB ring of a process's first thread (DefaultRingSize); with it,
// spills keep python3 and jq from their slow outliers (1.21 and 1.47 s
// among runs of 0.9 and 1.1 s).
const (
	spillEvery = 256 // records handled between looks at the rings
	// maxBacklog is small on purpose: a program that allocates faster
	// than the recorder keeps up with for long (bench/'s dense and
	// threads loops) must wait for it, else its threads take the CPUs
	// from the recorder. With 32 MiB, the 8-thread loop took 4.2 s
	// rather than 1.5, the dense loop 2.5 s rather than 2.2.
	maxBacklog = 2 << 20 // bytes a process may have spilled
)

// spillFull spills the rings that are half full, while the process's
// backlog is below maxBacklog. A ring is spilled once per burst: until
// the recorder has caught up with it to less than a quarter, a program
// that keeps it filling outpaces the recorder, and copying its records
// would only slow the recorder down more (the dense loop took 10% more
// recorder CPU).
func (p *process) spillFull() {
	backlog := 0
	for _, s := range p.active {
		backlog += s.pending() * 8
	}
	for _, s := range p.active {
		if backlog >= maxBacklog {
			return
		}
		size := uint64(len(s.ring)) * 8
		switch held := s.held(p.region); {
		case held < size/4:
			s.spent = false
		case held >= size/2 && !s.spent:
			backlog += s.spill(p.region) * 8
			s.spent = true
		}
	}
}

// drain handles every record that is due, in sequence order. With final
// set the process is gone: holes are skipped and counted as lost.
func (p *process) drain(rec *Recorder, final bool) int {
	n := 0
	p.drained = time.Now()
	if p.damaged != "" {
		rec.damaged(p) // found out of drain (ready)
		return 0
	}
	defer func() {
		if p.damaged != "" {
			rec.damaged(p)
		} else {
			p.release()
		}
	}()
	p.spillFull()
	sinceSpill := 0
	for p.damaged == "" {
		s := p.next(final)
		if s == nil {
			if final && p.skipHole() {
				continue
			}
			if !final {
				p.checkStall()
			}
			return n
		}
		if !p.handle(rec, s, final) || p.damaged != "" {
			return n
		}
		handled := 1 + p.run(rec, s, spillEvery-1-sinceSpill)
		n += handled
		if sinceSpill += handled; sinceSpill >= spillEvery {
			p.spillFull()
			sinceSpill = 0
		}
	}
	return n
}

// run handles the records that follow in the slot's backlog or ring, one
// after the other, while each is the next due and a plain allocation or
// free, at most limit of them, and returns how many it handled. A thread
// that allocates flat out writes long runs of them: taken straight from
// where they are, they skip the head (a copy), next and handle. Like the
// head's copy, each word is read once, into a local, and what is checked
// is what is used, whatever the program writes to its ring meanwhile.
// Anything else (a record cut by the ring's end, one not due, one not
// whole or of another kind) is left to handle. The two records' fields
// are read here and in handle as written out rather than through a
// shared helper: neither Go would inline, and the calls cost the drain
// about a tenth of its time per event (BenchmarkDrain).
func (p *process) run(rec *Recorder, s *slotReader, limit int) int {
	if limit <= 0 || s.head != nil || len(p.parked) > 0 || len(s.pointers) > 0 {
		return 0
	}
	var src []uint64
	fromBacklog := s.bi < len(s.backlog)
	if fromBacklog {
		src = s.backlog[s.bi:]
	} else {
		if s.pos == s.written && (!s.loadWritten(p.region) || s.pos == s.written) {
			return 0
		}
		at := s.pos / 8 & s.mask
		src = s.ring[at:min(uint64(len(s.ring)), at+(s.written-s.pos)/8)]
	}
	// The events go to rec.runBuf, and from there to the live set and the
	// trace runEvents at a time; before a stack node is written (it goes
	// to the trace before the event that names it), and when the run
	// ends, those so far. Their fields are set one by one: the other
	// fields of runBuf's events stay zero, and a composite literal would
	// clear all of them first.
	buf, k := &rec.runBuf, 0
	written := uint64(0) // a stack whose nodes are in the trace: those of a run's events are mostly the same
	i, n := 0, 0
loop:
	for n < limit && p.damaged == "" && i < len(src) {
		w0 := src[i]
		words := int(w0 >> 8 & 0xff)
		if words > len(src)-i {
			break
		}
		kind := w0 & 0xff
		stack := w0 >> stackShift & 0xffffffff
		var ek trace.Kind
		var seq, tsc, addr, size, inUse uint64
		whole := false
		switch {
		case kind == recAllocSame && words == allocSameWords && s.haveSame:
			// As an array, the record's words need no check each.
			r := (*[allocSameWords]uint64)(src[i:])
			ek, seq, tsc, addr, size, inUse = trace.KindAlloc, r[1], s.sameTsc, r[2], r[3], s.sameUse
		case kind == recFreeSame && words == freeSameWords && s.haveSame:
			r := (*[freeSameWords]uint64)(src[i:])
			ek, seq, tsc, addr, inUse = trace.KindFree, r[1], s.sameTsc, r[2], s.sameUse
		case kind == recAlloc && words == allocWords:
			r := (*[allocWords]uint64)(src[i:])
			ek, seq, tsc, addr, size, inUse, whole = trace.KindAlloc, r[1], r[2], r[3], r[4], r[5], true
		case kind == recFree && words == freeWords:
			r := (*[freeWords]uint64)(src[i:])
			ek, seq, tsc, addr, inUse, whole = trace.KindFree, r[1], r[2], r[3], r[4], true
		default:
			break loop
		}
		if seq != p.nextSeq {
			break loop
		}
		if whole {
			s.sameTsc, s.sameUse, s.haveSame = tsc, inUse, true
		}
		if stack != written && stack != 0 && !p.nodeWritten(stack) {
			rec.writeEvents(p, s, buf[:k])
			k = 0
			stack = p.writeStack(rec, stack)
		}
		written = stack
		ev := &buf[k]
		ev.Kind, ev.API, ev.Time, ev.Stack = ek, trace.API(w0>>apiShift&0xff), rec.clock.ns(tsc), stack
		ev.Addr, ev.Size, ev.StackInUse = addr, size, stackInUse(inUse)
		if k++; k == len(buf) {
			rec.writeEvents(p, s, buf[:])
			k = 0
		}
		p.nextSeq++
		i += words
		n++
	}
	if k > 0 {
		rec.writeEvents(p, s, buf[:k])
	}
	return p.ran(s, fromBacklog, i, n)
}

// ran consumes the words of the n records run handled, and returns n.
func (p *process) ran(s *slotReader, fromBacklog bool, words, n int) int {
	if fromBacklog {
		s.dropBacklog(words)
		return n
	}
	s.pos += uint64(words) * 8
	if s.pos-s.released >= uint64(len(s.ring))*4 { // half the ring, in bytes (see consume)
		s.release(p.region)
	}
	return n
}

// stallLimit is how long the recorder waits for a sequence number that
// does not come while a thread of the process waits for space in its
// ring. Every record before it has been handled, so only a record that
// was overwritten (or a counter bumped by a wild write), or a thread
// stopped between taking its number and publishing its record, can hold
// it: the first would hold the program up for good.
const stallLimit = 10 * time.Second

// checkStall gives up on the region when nothing has been due for
// stallLimit while a thread of the process waits for ring space, unless
// the process is stopped (SIGSTOP, a debugger): then its threads wait for
// it, not for the recorder.
func (p *process) checkStall() {
	if !p.waitsForSpace() {
		p.stallSince = time.Time{}
		return
	}
	if p.stallSince.IsZero() || p.stallSeq != p.nextSeq {
		p.stallSince, p.stallSeq = time.Now(), p.nextSeq
		return
	}
	if time.Since(p.stallSince) < stallLimit || stopped(p.pid) {
		return
	}
	p.damage(fmt.Sprintf("sequence number %d never came in %v, while its threads waited for the recorder", p.nextSeq, stallLimit))
}

// waitsForSpace reports whether a thread of the process waits, or is
// about to, for the recorder to make room in its ring.
func (p *process) waitsForSpace() bool {
	for _, s := range p.active {
		if atomic.LoadUint32(p.region.u32(p.region.slotOff(s.index)+slotWaiting)) != 0 ||
			s.held(p.region)+0xff*8 > uint64(len(s.ring))*8 { // no room for the longest record
			return true
		}
	}
	return false
}

// stopped reports whether process pid is stopped by a signal or traced.
func stopped(pid int) bool {
	fields, ok := statFields(pid)
	return ok && len(fields) > 0 && (fields[0] == "T" || fields[0] == "t")
}

// damage gives up on the process's region: the program, by a wild
// write, or a process of the tree on purpose, wrote there what the agent
// never does. Nothing more of it is read (what was read is in the trace,
// and the process's end says it was damaged, see Recorder.end), and the
// agent is let go at once wherever it may wait for the recorder: it
// stops recording, and the program runs on.
func (p *process) damage(why string) {
	if p.damaged != "" {
		return
	}
	p.damaged = why
	r := p.region
	atomic.StoreUint64(r.u64(hdrDisabled), 1)
	atomic.StoreUint64(r.u64(hdrScanDone), 1)
	r.wake(hdrScanDone, math.MaxInt32)
	for i := range p.slots {
		if atomic.LoadUint32(r.u32(r.slotOff(i)+slotWaiting)) != 0 {
			r.wake(r.slotOff(i)+slotRead, math.MaxInt32)
		}
	}
}

// release hands the agent back the space of everything consumed.
func (p *process) release() {
	for _, s := range p.active {
		s.release(p.region)
	}
}

// handle writes the record at the head of s. It returns false to wait: a
// fork whose child has not said hello yet.
//
// Allocations and frees, nearly every record, are handled here; the rest
// in handleOther, whose big frame and many cases they do not pay for.
func (p *process) handle(rec *Recorder, s *slotReader, final bool) bool {
	w := s.head
	var ev *trace.Event
	switch kind := w[0] & 0xff; {
	case len(p.parked) == 0 && (kind == recAlloc && len(w) >= allocWords || kind == recAllocSame && len(w) == allocSameWords && s.haveSame):
		tsc, addr, size, inUse := s.fields(kind, w)
		ev = rec.newEvent(trace.KindAlloc, trace.API(w[0]>>apiShift&0xff), tsc, w[0]>>stackShift&0xffffffff)
		ev.Addr, ev.Size, ev.StackInUse = addr, size, stackInUse(inUse)
	case len(s.pointers) == 0 && (kind == recFree && len(w) == freeWords || kind == recFreeSame && len(w) == freeSameWords && s.haveSame):
		tsc, addr, _, inUse := s.fields(kind, w)
		ev = rec.newEvent(trace.KindFree, trace.API(w[0]>>apiShift&0xff), tsc, w[0]>>stackShift&0xffffffff)
		ev.Addr, ev.StackInUse = addr, stackInUse(inUse)
	default:
		return p.handleOther(rec, s, final)
	}
	if ev.Stack != 0 && !p.nodeWritten(ev.Stack) {
		ev.Stack = p.writeStack(rec, ev.Stack)
	}
	rec.event(p, s, ev)
	p.nextSeq++
	s.consume(p.region)
	return true
}

// fields returns the time, address, size (0 for a free) and stack in use
// of ALLOC, FREE, ALLOC_SAME or FREE_SAME record w of kind, whose length
// was checked, the short ones with the slot's reference, which a whole
// one becomes. The drain's run decodes them itself, as arrays.
func (s *slotReader) fields(kind uint64, w []uint64) (tsc, addr, size, inUse uint64) {
	switch kind {
	case recAlloc:
		s.sameTsc, s.sameUse, s.haveSame = w[2], w[5], true
		return w[2], w[3], w[4], w[5]
	case recFree:
		s.sameTsc, s.sameUse, s.haveSame = w[2], w[4], true
		return w[2], w[3], 0, w[4]
	case recAllocSame:
		return s.sameTsc, w[2], w[3], s.sameUse
	default: // recFreeSame
		return s.sameTsc, w[2], 0, s.sameUse
	}
}

// handleOther is handle for any record.
func (p *process) handleOther(rec *Recorder, s *slotReader, final bool) bool {
	w := s.head
	kind := w[0] & 0xff
	api := trace.API(w[0] >> apiShift & 0xff)
	stack := w[0] >> stackShift & 0xffffffff
	if kind == 0 || kind >= uint64(len(recordWords)) || len(w) < recordWords[kind] {
		p.damage(fmt.Sprintf("thread slot %d holds a record of kind %d and %d words, which the agent never writes", s.index, kind, len(w)))
		return false
	}
	if (kind == recAllocSame || kind == recFreeSame) && !s.haveSame {
		p.damage(fmt.Sprintf("thread slot %d holds a record that repeats the time of an allocation or free before any", s.index))
		return false
	}
	switch kind {
	case recAlloc, recAllocSame:
		tsc, addr, size, inUse := s.fields(kind, w)
		if len(p.parked) > 0 {
			p.allocated(rec, addr)
		}
		ev := rec.newEvent(trace.KindAlloc, api, tsc, p.stack(rec, stack))
		ev.Addr, ev.Size, ev.StackInUse = addr, size, stackInUse(inUse)
		rec.event(p, s, ev)
	case recFree, recFreeSame:
		tsc, addr, _, inUse := s.fields(kind, w)
		ev := rec.newEvent(trace.KindFree, api, tsc, p.stack(rec, stack))
		ev.Addr, ev.StackInUse = addr, stackInUse(inUse)
		var words []uint64 // of the block, after a whole FREE's own (-leak-origins)
		if kind == recFree {
			words = w[freeWords:]
		}
		if len(words) > 0 || len(s.pointers) > 0 {
			if p.live != nil && (len(s.pointers) == 0 || s.pointersOf == ev.Addr) {
				o := trace.LeakOrigin{Parent: ev.Addr, Time: ev.Time, Thread: s.thread, Stack: ev.Stack}
				p.live.freeing(o, s.pointers)
				p.live.freeing(o, words)
			}
			s.pointers = s.pointers[:0]
		}
		rec.event(p, s, ev)
	case recPointers:
		if s.pointersOf != w[2] {
			s.pointers = s.pointers[:0]
		}
		s.pointersOf = w[2]
		// Only the words of a block the live set knows are of use
		// (liveSet.freeing), and a block holds no more words than its
		// usable size: the recorder keeps them until the block's FREE.
		size, known := uint64(0), false
		if p.live != nil && p.live.origins != nil {
			size, known = p.live.size(w[2])
		}
		if !known {
			break
		}
		if uint64(len(s.pointers)+len(w)-3) > (size+usableSlack)/8 {
			p.damage(fmt.Sprintf("thread slot %d sent more words of block %#x than its %d bytes hold", s.index, w[2], size))
			return false
		}
		s.pointers = append(s.pointers, w[3:]...)
	case recRealloc:
		if !s.parked && w[2] <= w[1] {
			p.damage(fmt.Sprintf("thread slot %d holds a realloc whose new block's sequence number %d is not after its old one's, %d", s.index, w[2], w[1]))
			return false
		}
		if !s.parked {
			// The old block was released now; the new one comes at
			// its own number. Keep the record until then.
			s.parked = true
			s.due = w[2]
			p.parked = append(p.parked, &parkedRealloc{slot: s})
			p.nextSeq++
			return true
		}
		p.reallocated(rec, s, api, stack)
	case recThread:
		tid := w[3]
		idx, ok := p.threads[tid]
		if !ok {
			idx = uint64(len(p.threads) + 1)
			p.threads[tid] = idx
			rec.write(rec.w.Thread(trace.Thread{Process: p.id, Index: idx, TID: tid, Time: rec.clock.ns(w[2])}))
		}
		s.thread, s.tid = idx, tid
		s.haveSame = false // a new thread's first allocation or free is whole
	case recStack:
		rec.write(rec.w.ThreadStack(trace.ThreadStack{Process: p.id, Index: s.thread, Time: rec.clock.ns(w[2]),
			HighWater: stackInUse(w[3]), Size: w[4]}))
	case recCalls:
		rec.write(rec.w.StackCalls(trace.StackCalls{Process: p.id, Thread: s.thread, Time: rec.clock.ns(w[2]),
			Max: stackInUse(w[3]), Level: stackInUse(w[4]), Calls: w[5]}))
		rec.calls += w[5]
	case recDeepest:
		if !p.deepest(rec, s, w, stack) {
			return false
		}
	case recThreadEnd:
		rec.write(rec.w.ThreadEnd(trace.ThreadEnd{Process: p.id, Index: s.thread, Time: rec.clock.ns(w[2])}))
	case recModule:
		if !rec.module(p, w) {
			return false
		}
	case recUnload:
		rec.write(rec.w.ModuleUnload(trace.ModuleUnload{Process: p.id, ID: w[3], Time: rec.clock.ns(w[2])}))
	case recExit:
		p.exited = true
		p.exitCode = int64(int32(uint32(w[3])))
	case recScan:
		rec.leakScan(p, w, s.tid)
	case recFork:
		if !rec.forked(p, w[1]+1, rec.clock.ns(w[2]), final) {
			return false
		}
	case recSpawn:
		if !rec.spawned(p, w) {
			return false
		}
	case recSkip:
	}
	p.nextSeq++
	s.consume(p.region)
	return true
}

// allocated splits a parked realloc whose old address another thread has
// just been given: its release must come first in the trace.
func (p *process) allocated(rec *Recorder, addr uint64) {
	for _, pr := range p.parked {
		w := pr.slot.head
		if !pr.split && w[4] == addr {
			pr.split = true
			ev := rec.newEvent(trace.KindFree, trace.API(w[0]>>apiShift&0xff), w[3], p.stack(rec, w[0]>>stackShift&0xffffffff))
			ev.Addr, ev.StackInUse = w[4], stackInUse(w[7])
			rec.event(p, pr.slot, ev)
		}
	}
}

func (p *process) reallocated(rec *Recorder, s *slotReader, api trace.API, stack uint64) {
	w := s.head
	split := false
	for i, pr := range p.parked {
		if pr.slot == s {
			split = pr.split
			p.parked = append(p.parked[:i], p.parked[i+1:]...)
			break
		}
	}
	p.allocated(rec, w[5])
	ev := rec.newEvent(trace.KindRealloc, api, w[3], p.stack(rec, stack))
	ev.OldAddr, ev.Addr, ev.Size, ev.StackInUse = w[4], w[5], w[6], stackInUse(w[7])
	if split {
		ev.Kind, ev.OldAddr = trace.KindAlloc, 0
	}
	rec.event(p, s, ev)
}

// usableSlack bounds how much more than was asked for malloc may give a
// block (malloc_usable_size): a block it maps on its own is rounded up to
// a page.
const usableSlack = 2 * 4096

const (
	allocWords     = 6
	freeWords      = 5
	allocSameWords = 4
	freeSameWords  = 3
)

// recordWords is how many words the agent writes of each kind of record,
// at least: allocWords and freeWords for the commonest two, as
// constants for the drain (run).
var recordWords = [...]int{recAlloc: allocWords, recFree: freeWords, recRealloc: 8, recSkip: 2, recModule: 6, recUnload: 4,
	recThread: 4, recExit: 4, recThreadEnd: 3, recFork: 3, recStack: 5, recCalls: 6, recDeepest: 5, recScan: 4, recPointers: 3, recSpawn: 5,
	recAllocSame: allocSameWords, recFreeSame: freeSameWords}

// deepest writes a DEEPEST record w of slot s: the call stack of the
// thread's deepest function entry, with its frames' sizes (two 32-bit
// sizes a word after the fifth).
func (p *process) deepest(rec *Recorder, s *slotReader, w []uint64, stack uint64) bool {
	n := w[4]
	if n > uint64(2*(len(w)-5)) {
		p.damage(fmt.Sprintf("thread slot %d holds a deepest stack of %d frame sizes in %d words", s.index, n, len(w)))
		return false
	}
	sizes := make([]uint64, n)
	for i := range sizes {
		sizes[i] = w[5+i/2] >> (32 * (i % 2)) & 0xffffffff
	}
	rec.write(rec.w.DeepestStack(trace.DeepestStack{Process: p.id, Thread: s.thread, Time: rec.clock.ns(w[2]),
		Bytes: stackInUse(w[3]), Stack: p.stack(rec, stack), FrameSizes: sizes}))
	return true
}

// stackInUse returns the stack in use an agent's record says, or 0 (not
// known) for a value no stack has: the trace holds at most
// trace.MaxStackInUse.
func stackInUse(v uint64) uint64 {
	if v > trace.MaxStackInUse {
		return 0
	}
	return v
}

// stack makes sure the trace holds node id and its ancestors, and returns
// the id to put in the event (0 if the node table is unreadable).
func (p *process) stack(rec *Recorder, id uint64) uint64 {
	if id == 0 || p.nodeWritten(id) {
		return id
	}
	return p.writeStack(rec, id)
}

// writeStack is stack for a node not written yet.
func (p *process) writeStack(rec *Recorder, id uint64) uint64 {
	p.chain = p.chain[:0]
	for cur := id; cur != 0 && !p.nodeWritten(cur); {
		parent, module, offset, ok := p.region.node(cur)
		if !ok || uint64(parent) >= cur {
			// The agent hands out node ids in order, each
			// after its parent's.
			p.damage(fmt.Sprintf("call-stack node %d is not in the table, or names a parent (%d) not before it", cur, parent))
			return 0
		}
		p.chain = append(p.chain, trace.StackNode{Process: p.id, ID: cur, Parent: uint64(parent),
			Module: uint64(module), Offset: offset})
		cur = uint64(parent)
	}
	for i := len(p.chain) - 1; i >= 0; i-- {
		n := p.chain[i]
		rec.write(rec.w.StackNode(n))
		p.markNode(n.ID)
		if obj, ok := p.modules[uint32(n.Module)]; ok {
			rec.wantSymbol(obj, n.Offset)
		}
	}
	return id
}

func (p *process) nodeWritten(id uint64) bool {
	i := id / 64
	return i < uint64(len(p.nodes)) && p.nodes[i]&(1<<(id%64)) != 0
}

func (p *process) markNode(id uint64) {
	i := id / 64
	for uint64(len(p.nodes)) <= i {
		p.nodes = append(p.nodes, 0)
	}
	p.nodes[i] |= 1 << (id % 64)
}

// moduleRecord is a MODULE record, decoded.
type moduleRecord struct {
	tsc      uint64
	id       uint64
	base     uint64
	segments []trace.Segment
	buildID  []byte
	path     string
}

// recordBytes returns the first n bytes of the words w, in which the
// agent packs a string into a record (little-endian, padded to a word),
// or false if w holds fewer.
func recordBytes(w []uint64, n uint64) ([]byte, bool) {
	nw := (n + 7) / 8
	if nw > uint64(len(w)) {
		return nil, false
	}
	b := make([]byte, nw*8)
	for k := range nw {
		binary.LittleEndian.PutUint64(b[k*8:], w[k])
	}
	return b[:n], true
}

func parseModule(w []uint64) (moduleRecord, bool) {
	m := moduleRecord{tsc: w[2], id: w[3], base: w[4]}
	nseg := int(w[5])
	i := 6
	if nseg > 8 || i+4*nseg >= len(w) {
		return m, false
	}
	for s := 0; s < nseg; s++ {
		m.segments = append(m.segments, trace.Segment{Vaddr: w[i], Memsz: w[i+1], Offset: w[i+2], Flags: w[i+3]})
		i += 4
	}
	words := func(n uint64) ([]byte, bool) {
		if n > 4096 {
			return nil, false
		}
		b, ok := recordBytes(w[i:], n)
		i += int((n + 7) / 8)
		return b, ok
	}
	if i >= len(w) {
		return m, false
	}
	idLen := w[i]
	i++
	var ok bool
	if m.buildID, ok = words(idLen); !ok || i >= len(w) {
		return m, false
	}
	pathLen := w[i]
	i++
	path, ok := words(pathLen)
	m.path = string(path)
	return m, ok
}
