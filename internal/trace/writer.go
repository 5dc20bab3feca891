package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// DefaultBlockSize is the decoded size at which a Writer ends a block unless
// told otherwise: big enough that zstd and the predictors, which start
// afresh in every block, do well (4 MiB blocks make traces 3% smaller than
// 1 MiB on the malloc-dense loop, 15% on sqlite3), small enough that
// damage costs little and readers can work on blocks in parallel.
const DefaultBlockSize = 4 << 20

// maxEventSize is the most bytes an event adds to the streams of a block:
// the Events record that ends the run before it, a Context record, a Time
// record, its op, and eight varints at their longest (size, address code
// and depth, reference code, stack, two raw addresses, stack use).
const maxEventSize = (1 + binary.MaxVarintLen64) + (1 + 2*binary.MaxVarintLen64) + (1 + binary.MaxVarintLen64) +
	1 + 8*binary.MaxVarintLen64

// blocksInFlight bounds how many finished blocks may wait to be compressed
// and written while the caller encodes the next one.
const blocksInFlight = 2

var errWriterClosed = errors.New("trace writer is closed")

// Writer writes a trace file. It encodes records and events into the
// streams of a block, and compresses and writes each finished block in the
// background while the caller goes on encoding the next one.
//
// Errors are sticky: once writing to the underlying writer has failed, every
// later call returns that error, and the blocks written before it stay
// readable. A Writer is not safe for concurrent use.
type Writer struct {
	// BlockSize is the decoded size in bytes (the sum of the lengths of its
	// streams) at which a block is ended; 0 means DefaultBlockSize. Tests
	// set it small to get many blocks.
	BlockSize int
	// Uncompressed stores blocks as they are instead of compressing them.
	Uncompressed bool

	out     io.Writer
	maxRaw  int       // the most a block may hold: maxBlockRaw, less in tests
	unit    uint64    // Info.TimeUnit
	perUnit divider   // divides by unit
	s       streamSet // the block being encoded
	rec     []byte    // one non-event record being encoded
	body    []byte    // the body of a skippable record being encoded
	checkAt int       // the number of events of the block at which to check its size

	// State of the block being encoded, reset with every block.
	haveContext        bool
	process, thread    uint64
	time               uint64     // in units, as the block's Time records have moved it
	timeEnd            uint64     // events before this time in ns are at time; 0 if not known
	run                uint64     // events since the last Events record
	heap               *heapState // of process, if haveContext
	heaps              heapStates
	ti                 uint32 // the index of thread in heap.threads, if haveContext
	prevStack, prevRaw uint64
	stackUse           stackUsePredictor
	coded              recordState // for StackNode and Symbol records

	// freshRun is set when appendAddrFast codes an allocation as a step
	// from fresh memory: only then does Events try freshAllocs on the
	// events after it, so that a program whose allocations reuse freed
	// blocks does not pay for a try at each.
	freshRun bool
	// escapedFree is set when appendRef codes a free as an escape: only
	// then does Events try escapedFrees on the events after it.
	escapedFree bool

	floorTime  uint64 // wire time of the latest event; no event goes below it
	lastTime   uint64 // latest time in ns of any record, for End
	events     uint64
	endWritten bool
	closed     bool
	err        error // sticky

	pipe pipeline
}

// NewWriter writes the file header to w and starts the first block with the
// Info record. A zero info.TimeUnit means 1 ns.
func NewWriter(w io.Writer, info Info) (*Writer, error) {
	if info.TimeUnit == 0 {
		info.TimeUnit = 1
	}
	var header [fileHeaderSize]byte
	copy(header[:], Magic)
	binary.LittleEndian.PutUint16(header[8:], Version)
	if _, err := w.Write(header[:]); err != nil {
		return nil, fmt.Errorf("writing trace header: %w", err)
	}
	tw := &Writer{out: w, maxRaw: maxBlockRaw, unit: info.TimeUnit, perUnit: newDivider(info.TimeUnit)}
	tw.pipe.init()
	tw.s = tw.pipe.streams()
	if err := tw.info(info); err != nil {
		return nil, err
	}
	return tw, nil
}

// Event writes a memory event. Once the Writer's buffers have grown to
// the size of a block, it allocates nothing: this is the hot path of
// recording. The event's API must be below 32, all the format has room for.
//
// Times are written in units of Info.TimeUnit, rounded down, and clamped so
// that they never go below the time of the previous event: events of
// different threads may reach the recorder slightly out of order, and the
// format moves time on by unsigned steps.
func (w *Writer) Event(e Event) error { return w.EventAt(&e) }

// EventAt is Event for an event it reads in place. The recorder writes
// millions a second, and copying one just built field by field into a
// call's arguments stalls on store forwarding.
func (w *Writer) EventAt(e *Event) error { return w.Events(unsafe.Slice(e, 1)) }

// Events writes the memory events es, in order, as EventAt would one by
// one, for one call and one check of the Writer's state: the recorder
// takes a thread's allocations and frees from its ring in runs. Should
// one fail, the events before it are written, those after it not.
func (w *Writer) Events(es []Event) error {
	// Without an error or a Close, which check looks for, there is nothing
	// to check: do not pay for the call. (The pipeline may fail while
	// the events are encoded: the next call finds out.)
	if w.err != nil || w.closed || w.pipe.failed.Load() {
		if err := w.check(); err != nil {
			return err
		}
	}
	for i := 0; i < len(es); i++ {
		e := &es[i]
		// One branch for the three checks of badEvent: KindAlloc to
		// KindRealloc are the events, and the API and the stack in use
		// must fit in their bits.
		if e.Kind-KindAlloc > KindRealloc-KindAlloc || uint64(e.API)&^apiMask|e.StackInUse&^MaxStackInUse != 0 {
			return badEvent(e)
		}
		// What follows encodes e into the event streams, in this function
		// rather than one of its own, not to pay for a call per event:
		// after a Context record if e's process or thread is not the
		// block's current one, and a Time record if its time is not the
		// block's current time.
		if !w.haveContext || e.Process != w.process || e.Thread != w.thread {
			w.appendContext(e)
		}
		h := w.heap
		// Most events share the time of the event before them: a
		// comparison finds that out for less than the division.
		if e.Time >= w.timeEnd {
			w.appendTime(e.Time)
		}
		if e.Kind == KindRealloc && e.Addr != e.OldAddr && h.liveAddrs.holds(e.Addr) {
			// An allocation finds out in appendAddr; a realloc must
			// before it codes its old block.
			w.appendLostFree(h, e.Addr)
		}
		w.s[streamOps] = append(w.s[streamOps], opByte(e.Kind, e.API))
		switch e.Kind {
		case KindAlloc:
			w.put(streamSize, e.Size)
			if !w.appendAddrFast(h, w.ti, e.Addr, e.Size) {
				w.appendAddr(h, w.ti, e.Addr, e.Size)
			}
		case KindFree:
			w.appendRef(h, w.ti, e.Addr)
		case KindRealloc:
			w.appendRef(h, w.ti, e.OldAddr)
			w.put(streamSize, e.Size)
			w.appendAddr(h, w.ti, e.Addr, e.Size)
		}
		w.put(streamStack, zigzag(int64(e.Stack-w.prevStack)))
		w.prevStack = e.Stack
		if w.stackUse.repeats(e.Process, e.Stack, e.StackInUse) {
			w.put(streamStackUse, 0)
		} else {
			w.put(streamStackUse, w.stackUse.code(e.Process, e.Stack, e.StackInUse))
		}
		w.run++

		w.events++
		if len(w.s[streamOps]) >= w.checkAt && w.blockFull() {
			if err := w.endBlock(); err != nil {
				return err
			}
		}
		if w.freshRun || w.escapedFree {
			// A fresh block followed by another allocation is most
			// often followed by more (the allocator is carving a heap
			// that grows), and a free of a block the Writer does not
			// know followed by another free by more frees (the program
			// frees a heap built blocks of the trace before).
			fresh, next := w.freshRun, KindFree
			if fresh {
				next = KindAlloc
			}
			w.freshRun, w.escapedFree = false, false
			if i+1 == len(es) || es[i+1].Kind != next {
				continue
			}
			var n int
			if fresh {
				n = w.freshAllocs(es[i+1:])
			} else {
				n = w.escapedFrees(es[i+1:])
			}
			if n > 0 {
				i += n
				if len(w.s[streamOps]) >= w.checkAt && w.blockFull() {
					if err := w.endBlock(); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// badEvent returns why e cannot be written.
func badEvent(e *Event) error {
	switch {
	case !e.Kind.IsEvent():
		return fmt.Errorf("writing event: kind %v is not an event", e.Kind)
	case e.API > apiMask:
		return fmt.Errorf("writing event: api %d is out of range", e.API)
	}
	return fmt.Errorf("writing event: stack in use %d is out of range", e.StackInUse)
}

// blockFull reports whether the block has reached its size. If it has not,
// it notes how many events it may take until it does, so that most events
// need not add up the lengths of the streams.
func (w *Writer) blockFull() bool {
	n, events := w.s.rawLen(), len(w.s[streamOps])
	if n >= w.blockSize() || events >= maxBlockEvents {
		return true
	}
	w.checkAt = min(events+max(1, (w.blockSize()-n)/maxEventSize), maxBlockEvents)
	return false
}

// maxBlockEvents ends a block after this many events, however well they
// compress: what the Writer and every reader keep for a block's
// allocations (their handles) grows with its events, and a program whose
// events its predictors guess (a big heap built in a loop) put millions
// in one block.
const maxBlockEvents = 1 << 18

// appendContext writes a Context record that makes e's process and
// thread the current ones, and finds their predictor state.
func (w *Writer) appendContext(e *Event) {
	w.endRun()
	rec := append(w.s[streamRecords], byte(KindContext))
	rec = binary.AppendUvarint(rec, e.Process)
	w.s[streamRecords] = binary.AppendUvarint(rec, e.Thread)
	if !w.haveContext || e.Process != w.process {
		w.heap = w.heaps.get(e.Process)
	}
	w.haveContext, w.process, w.thread = true, e.Process, e.Thread
	w.ti = w.heap.thread(e.Thread)
	w.stackUse.context(e.Process, e.Thread)
}

// appendLostFree writes a free of the block live at addr in this block,
// for an allocation at addr that comes next: the program's free of it was
// not seen. (An allocator gives out only addresses it has been given
// back.) The free, of API APILost and no stack, tells readers which block
// the allocation replaces, so that they need not look the address of
// every allocation up: an allocation over a block of an earlier trace
// block, which the Writer does not know, is left to them.
func (w *Writer) appendLostFree(h *heapState, addr uint64) {
	w.s[streamOps] = append(w.s[streamOps], opByte(KindFree, APILost))
	w.appendRef(h, w.ti, addr)
	w.put(streamStack, zigzag(-int64(w.prevStack)))
	w.prevStack = 0
	w.put(streamStackUse, 0) // what the thread's event before used: a free of no stack
	w.run++
	w.events++
}

// appendTime moves the block's time on to that of an event at ns, in
// units, with a Time record if it is not the block's current time.
func (w *Writer) appendTime(ns uint64) {
	t := max(w.perUnit.div(ns), w.floorTime)
	if t != w.time {
		w.endRun()
		rec := append(w.s[streamRecords], byte(KindTime))
		w.s[streamRecords] = binary.AppendUvarint(rec, t-w.time)
		w.time = t
		w.floorTime = t
		w.lastTime = max(w.lastTime, t*w.unit)
	}
	// Until ns reaches the next unit, events fall in t: below it, their
	// time divides to t or less, and the floor is t.
	w.timeEnd = math.MaxUint64
	if hi, lo := bits.Mul64(t+1, w.unit); hi == 0 && t+1 != 0 {
		w.timeEnd = lo
	}
}

// writerMaxDepth bounds the depths in class lists the Writer codes: past
// it, a depth costs more than a step from fresh memory or an escape does
// (on the cross-thread free benchmark, the trace is 2% smaller than with
// every depth of the lists).
const writerMaxDepth = 128

// appendAddr encodes the address of a new block of size bytes, allocated
// by thread ti: by its depth in the thread's class list of its size if it
// is there, else by its depth in the source thread's, else as the latest
// address freed, else as a step from the end of the thread's previous
// fresh allocation, else in the raw stream.
//
// The address table says whose class list an address was pushed on last
// (see listedMark), so that an address on none, as fresh memory is, costs
// no scan, and one on a list costs one: the Writer looks for it in that
// list only, the thread's own or the source thread's.
func (w *Writer) appendAddr(h *heapState, ti uint32, addr, size uint64) {
	t := &h.threads[ti]
	c := sizeClass(size)
	code := uint64(addrEscape)
	depth := -1
	slot := h.liveAddrs.place(addr)
	if holdsLive(slot) || slot == nil && h.liveAddrs.holds(addr) {
		// A live block is at addr: only an allocation gets here (a
		// realloc wrote its lost free before its own op). The lost
		// free goes before the allocation, whose op is written: its op
		// takes the allocation's place, which moves on. Its reference
		// and stack come before the allocation's address and stack, as
		// the decoding goes.
		ops := w.s[streamOps]
		op := ops[len(ops)-1]
		w.s[streamOps] = ops[:len(ops)-1]
		w.appendLostFree(h, addr)
		w.s[streamOps] = append(w.s[streamOps], op)
		slot = h.liveAddrs.place(addr)
	}
	if l := t.list(c); l != nil && c != 0 && l.atTop(addr) {
		// The top of the thread's own list, the commonest case: no need
		// to wait for the mark.
		l.takeAt(0)
		depth, code = 0, addrDepth
	} else if slot != nil && *slot&listedMark != 0 && c != 0 {
		if owner := *slot &^ listedMark; owner == ti || owner == t.source {
			if l := h.threads[owner].list(c); l != nil {
				if depth = l.depthOf(addr, writerMaxDepth); depth >= 0 {
					l.takeAt(uint64(depth))
					code = addrDepth + 2*uint64(depth)
					if owner != ti {
						code = addrSource
					}
				}
			}
		}
	}
	switch {
	case depth >= 0:
	case addr == h.lastFreed:
		code = addrLastFreed
	default:
		if v, ok := stepValue(addr - t.next); ok {
			code = addrStep + 2*v
		} else {
			w.appendRawAddr(addr)
		}
		t.fresh(addr, size)
	}
	w.put(streamAddr, code)
	if code == addrSource {
		w.put(streamAddr, uint64(depth))
	}
	h.liveAddrs.fill(slot, addr, h.allocate(ti, addr, c))
}

// appendAddrFast is appendAddr for the commonest addresses of new
// blocks, aligned in the page the address table looked up last and not
// live: the top of the thread's class list of their size, the latest
// address freed, or fresh memory a step from the thread's previous fresh
// block. It has no slow paths to call but allocate's, so that what it
// works on stays in registers. For any other address it reports false,
// having changed nothing.
func (w *Writer) appendAddrFast(h *heapState, ti uint32, addr, size uint64) bool {
	table, t := &h.liveAddrs, &h.threads[ti]
	if addr&(addrAlign-1) != 0 || addr>>pageBits+1 != table.cacheKey[0] {
		return false
	}
	idx := table.cacheIdx[0]
	slot := &table.pages[idx].nums[(addr>>alignBits)&(pageSlots-1)]
	mark := *slot
	if mark != 0 && mark&listedMark == 0 {
		return false // live: its lost free comes first
	}
	c := sizeClass(size)
	var code uint64
	if l := t.list(c); l != nil && c != 0 && l.atTop(addr) {
		l.takeTop()
		code = addrDepth
	} else if mark != 0 && c != 0 {
		return false // listed: to look for deeper in a list
	} else if addr == h.lastFreed {
		code = addrLastFreed
	} else if v, ok := stepValue(addr - t.next); ok {
		code = addrStep + 2*v
		t.fresh(addr, size)
		w.freshRun = true
	} else {
		return false
	}
	if mark == 0 {
		table.pageLive[idx]++
		table.used++
	}
	*slot = h.allocate(ti, addr, c)
	w.put(streamAddr, code)
	return true
}

// freshAllocs encodes the allocations at the start of es that appendAddrFast
// would code as steps from fresh memory, of the block's current thread and
// time, as Events would one by one, up to the first other event, the
// first allocation for which allocate would make room, or the event at
// which the block's size is to be checked, and returns how many it
// encoded. Allocators carve most blocks of a growing heap one after the
// other: a loop over them alone keeps the state it moves in registers,
// as the decoder's freshAllocs does.
func (w *Writer) freshAllocs(es []Event) int {
	if len(es) == 0 || es[0].Kind != KindAlloc || !w.haveContext {
		return 0
	}
	// Where allocations reuse freed blocks, the first is seldom fresh:
	// look at its slot before anything else.
	h := w.heap
	table := &h.liveAddrs
	key, idx := table.cacheKey[0], table.cacheIdx[0]
	if first := es[0].Addr; first>>pageBits+1 != key || key == 0 ||
		table.pages[idx].nums[(first>>alignBits)&(pageSlots-1)] != 0 {
		return 0
	}
	page := &table.pages[idx]
	ti := w.ti
	t := &h.threads[ti]
	es = es[:min(len(es), h.allocateRoom(t), max(1, w.checkAt-len(w.s[streamOps])))]
	process, thread, timeEnd, lastFreed := w.process, w.thread, w.timeEnd, h.lastFreed
	serial, at, next, prevStack := h.serial, h.recentAt, t.next, w.prevStack
	listOf := t.listOf
	k := 0
	for ; k < len(es); k++ {
		e := &es[k]
		addr, size := e.Addr, e.Size
		if e.Kind != KindAlloc || uint64(e.API)&^apiMask|e.StackInUse&^MaxStackInUse != 0 ||
			e.Process != process || e.Thread != thread || e.Time >= timeEnd ||
			addr&(addrAlign-1) != 0 || addr>>pageBits+1 != key || addr == lastFreed {
			break
		}
		slot := &page.nums[(addr>>alignBits)&(pageSlots-1)]
		if *slot != 0 {
			break // live or listed: appendAddr's
		}
		c := sizeClass(size)
		if listOf != nil && c != 0 && listOf[c] != 0 && t.lists[listOf[c]-1].atTop(addr) {
			break
		}
		v, ok := stepValue(addr - next)
		if !ok {
			break
		}
		next = addr + chunkSize(size)
		serial++
		num := h.number(handle{addr: addr, thread: ti, class: c}, serial)
		at = (at + 1) % recentDepth
		h.recent[at] = num
		q := len(t.queue)
		t.queue = t.queue[:q+1]
		t.queue[q] = queued{num: num, serial: serial}
		*slot = num
		table.pageLive[idx]++

		w.s[streamOps] = append(w.s[streamOps], opByte(KindAlloc, e.API))
		w.put(streamSize, size)
		w.put(streamAddr, addrStep+2*v)
		w.put(streamStack, zigzag(int64(e.Stack-prevStack)))
		prevStack = e.Stack
		if w.stackUse.repeats(process, e.Stack, e.StackInUse) {
			w.put(streamStackUse, 0)
		} else {
			w.put(streamStackUse, w.stackUse.code(process, e.Stack, e.StackInUse))
		}
	}
	h.serial, h.recentAt, t.next, w.prevStack = serial, at, next, prevStack
	table.used += k
	w.run += uint64(k)
	w.events += uint64(k)
	return k
}

// escapedFrees encodes the frees at the start of es that appendRef would
// code as escapes (of blocks the address table does not hold), of the
// block's current thread and time, as Events would one by one, up to the
// first other event or the event at which the block's size is to be
// checked, and returns how many it encoded. A program that frees a heap
// it built long before frees blocks of earlier trace blocks, one after
// the other. Their codes depend on nothing the Writer's tables hold, so
// it finds how many there are first, looking up no page the table was
// found not to have (it adds none), and then appends their codes a
// stream at a time: a loop that appends to one stream keeps it in
// registers.
func (w *Writer) escapedFrees(es []Event) int {
	if len(es) == 0 || !w.haveContext {
		return 0
	}
	table := &w.heap.liveAddrs
	es = es[:min(len(es), max(1, w.checkAt-len(w.s[streamOps])))]
	process, thread, timeEnd := w.process, w.thread, w.timeEnd
	absent := uint64(0) // page number + 1 of a page the table has no block in, 0 if none
	n := 0
	for ; n < len(es); n++ {
		e := &es[n]
		if e.Kind != KindFree || uint64(e.API)&^apiMask|e.StackInUse&^MaxStackInUse != 0 ||
			e.Process != process || e.Thread != thread || e.Time >= timeEnd {
			break
		}
		if addr := e.Addr; table.used != 0 && addr>>pageBits+1 != absent {
			if addr&(addrAlign-1) != 0 {
				break // release looks it up among the odd ones
			}
			slot, _ := table.slotOf(addr)
			if slot == nil {
				absent = addr>>pageBits + 1
			} else if holdsLive(slot) {
				break // a block of this trace block: its handle names it
			}
		}
	}
	if n == 0 {
		return 0
	}
	es = es[:n]

	ops, refs := w.s[streamOps], w.s[streamRef]
	for i := range es {
		ops = append(ops, opByte(KindFree, es[i].API))
		refs = append(refs, refEscape)
	}
	w.s[streamOps], w.s[streamRef] = ops, refs

	raw, tails := w.s[streamRawAddr], w.s[tailOf(streamRawAddr)]
	prev := w.prevRaw
	for i := range es {
		v := zigzag(int64(es[i].Addr - prev))
		prev = es[i].Addr
		switch {
		case v < 0x80:
			raw = append(raw, byte(v))
		case v < 1<<14: // put's and putLong's coding
			raw = append(raw, byte(v)|0x80)
			tails = append(tails, byte(v>>7))
		default:
			raw = append(raw, byte(v)|0x80)
			tails = binary.AppendUvarint(tails, v>>7)
		}
	}
	w.s[streamRawAddr], w.s[tailOf(streamRawAddr)] = raw, tails
	w.prevRaw, w.heap.lastFreed = prev, prev

	stacks := w.s[streamStack]
	prev = w.prevStack
	for i := range es {
		v := zigzag(int64(es[i].Stack - prev))
		prev = es[i].Stack
		stacks = w.putHeld(streamStack, stacks, v)
	}
	w.s[streamStack], w.prevStack = stacks, prev

	uses := w.s[streamStackUse]
	for i := range es {
		e := &es[i]
		v := uint64(0)
		if !w.stackUse.repeats(process, e.Stack, e.StackInUse) {
			v = w.stackUse.code(process, e.Stack, e.StackInUse)
		}
		uses = w.putHeld(streamStackUse, uses, v)
	}
	w.s[streamStackUse] = uses

	w.run += uint64(n)
	w.events += uint64(n)
	return n
}

// putHeld is put for a loop that holds stream k's bytes, buf, outside
// w.s while it appends to them: it returns buf with v's code appended.
func (w *Writer) putHeld(k int, buf []byte, v uint64) []byte {
	if v < 0x80 {
		return append(buf, byte(v))
	}
	return w.putHeldLong(k, buf, v)
}

// putHeldLong is putHeld's case of a code of more than a byte, out of
// line so that putHeld is inlined in the loops.
//
//go:noinline
func (w *Writer) putHeldLong(k int, buf []byte, v uint64) []byte {
	w.s[k] = buf
	w.putLong(k, v)
	return w.s[k]
}

// appendRef encodes the address of a block being released by thread ti:
// by the block's handle if it was allocated in this block, else in the
// raw stream.
func (w *Writer) appendRef(h *heapState, ti uint32, addr uint64) {
	num := h.liveAddrs.release(addr, h.handles)
	if num == 0 {
		w.put(streamRef, refEscape)
		w.appendRawAddr(addr)
		h.lastFreed = addr
		w.escapedFree = true
		return
	}
	hd := h.handles[num]
	w.put(streamRef, h.refCode(ti, num, hd.thread))
	if dropped, didDrop := h.release(ti, num); didDrop {
		h.liveAddrs.unlist(dropped, hd.thread)
	}
}

func (w *Writer) appendRawAddr(addr uint64) {
	w.put(streamRawAddr, zigzag(int64(addr-w.prevRaw)))
	w.prevRaw = addr
}

// put appends v to the varint column k: its low bits to k, the rest to
// k's tails. The common one-byte case is inlined, where k is a constant.
func (w *Writer) put(k int, v uint64) {
	if v < 0x80 {
		w.s[k] = append(w.s[k], byte(v))
		return
	}
	w.putLong(k, v)
}

// putLong is put for a value of two bytes or more. Inlined, it would make
// put too big to be.
//
//go:noinline
func (w *Writer) putLong(k int, v uint64) {
	w.s[k] = append(w.s[k], byte(v)|0x80)
	tails := tailOf(k)
	if v < 1<<14 { // a tail of one byte, as most are
		w.s[tails] = append(w.s[tails], byte(v>>7))
		return
	}
	w.s[tails] = binary.AppendUvarint(w.s[tails], v>>7)
}

// endRun ends the current run of events with an Events record.
func (w *Writer) endRun() {
	if w.run > 0 {
		rec := append(w.s[streamRecords], byte(kindEvents))
		w.s[streamRecords] = binary.AppendUvarint(rec, w.run)
		w.run = 0
	}
}

// ProcessStart writes the start of a process.
func (w *Writer) ProcessStart(p Process) error {
	b := w.begin(KindProcessStart)
	b = appendUvarints(b, p.ID, p.PID, p.PPID, p.Parent, p.Time)
	b = appendString(b, p.Exe)
	b = appendStrings(b, p.Args)
	b = appendString(b, p.Cwd)
	return w.finish(b, p.Time)
}

// ProcessEnd writes how a process ended.
func (w *Writer) ProcessEnd(p ProcessEnd) error {
	b := w.begin(KindProcessEnd)
	b = appendUvarints(b, p.ID, p.Time, uint64(p.How))
	b = binary.AppendVarint(b, p.Code)
	b = binary.AppendUvarint(b, p.Lost)
	return w.finish(b, p.Time)
}

// Thread writes the first sighting of a thread.
func (w *Writer) Thread(t Thread) error {
	b := w.begin(KindThread)
	b = appendUvarints(b, t.Process, t.Index, t.TID, t.Time)
	return w.finish(b, t.Time)
}

// ThreadStack writes the high-water mark of a thread's stack.
func (w *Writer) ThreadStack(t ThreadStack) error {
	b := w.begin(KindThreadStack)
	b = appendUvarints(b, t.Process, t.Index, t.Time, t.HighWater, t.Size)
	return w.finish(b, t.Time)
}

// ThreadEnd writes the exit of a thread.
func (w *Writer) ThreadEnd(t ThreadEnd) error {
	b := w.begin(KindThreadEnd)
	b = appendUvarints(b, t.Process, t.Index, t.Time)
	return w.finish(b, t.Time)
}

// Object writes an ELF file's identity.
func (w *Writer) Object(o Object) error {
	b := w.begin(KindObject)
	b = binary.AppendUvarint(b, o.ID)
	b = appendString(b, o.Path)
	b = appendBytes(b, o.BuildID)
	return w.finish(b, 0)
}

// Module writes the mapping of an object into a process.
func (w *Writer) Module(m Module) error {
	b := w.begin(KindModule)
	b = appendUvarints(b, m.Process, m.ID, m.Object, m.Base, m.Time, uint64(len(m.Segments)))
	for _, s := range m.Segments {
		b = appendUvarints(b, s.Vaddr, s.Memsz, s.Offset, s.Flags)
	}
	return w.finish(b, m.Time)
}

// ModuleUnload writes the unmapping of a module.
func (w *Writer) ModuleUnload(m ModuleUnload) error {
	b := w.begin(KindModuleUnload)
	b = appendUvarints(b, m.Process, m.ID, m.Time)
	return w.finish(b, m.Time)
}

// StackNode writes one node of a process's call-stack tree.
func (w *Writer) StackNode(n StackNode) error {
	return w.finishCoded(KindStackNode, func(b []byte, s *recordState) []byte { return s.appendStackNode(b, &n) })
}

// String writes an interned string.
func (w *Writer) String(s String) error {
	b := w.begin(KindString)
	b = binary.AppendUvarint(b, s.ID)
	b = appendString(b, s.Value)
	return w.finish(b, 0)
}

// Symbol writes the source frames of a code address.
func (w *Writer) Symbol(sym Symbol) error {
	return w.finishCoded(KindSymbol, func(b []byte, s *recordState) []byte { return s.appendSymbol(b, &sym) })
}

// ObjectStatus writes how well an object could be symbolized.
func (w *Writer) ObjectStatus(s ObjectStatus) error {
	b := w.begin(KindObjectStatus)
	b = appendUvarints(b, s.Object, uint64(s.Status))
	b = appendString(b, s.Message)
	return w.finish(b, 0)
}

// Type writes a named type of an object's program. Its record is
// skippable: a reader that does not know it passes over it by its length.
func (w *Writer) Type(t Type) error {
	b := w.begin(KindType)
	body := uvarintLen(t.Object) + uvarintLen(t.Size) + uvarintLen(uint64(len(t.Name))) + len(t.Name)
	b = appendUvarints(b, uint64(body), t.Object, t.Size)
	b = appendString(b, t.Name)
	return w.finish(b, 0)
}

// StackCalls writes a thread's stack at its function entries and returns.
// Its record is skippable.
func (w *Writer) StackCalls(c StackCalls) error {
	w.body = appendUvarints(w.body[:0], c.Process, c.Thread, c.Time, c.Max, c.Level, c.Calls)
	return w.skippable(KindStackCalls, w.body, c.Time)
}

// DeepestStack writes the call stack at a thread's deepest function entry.
// Its record is skippable.
func (w *Writer) DeepestStack(d DeepestStack) error {
	b := appendUvarints(w.body[:0], d.Process, d.Thread, d.Time, d.Bytes, d.Stack, uint64(len(d.FrameSizes)))
	w.body = appendUvarints(b, d.FrameSizes...)
	return w.skippable(KindDeepestStack, w.body, d.Time)
}

// LeakScan writes the leak classes of a process's blocks at its exit. Its
// record is skippable.
func (w *Writer) LeakScan(l LeakScan) error {
	b := appendUvarints(w.body[:0], l.Process, l.Time, l.Duration)
	b = appendString(b, l.Error)
	w.body = appendUvarints(b, l.DefinitelyLostBytes, l.DefinitelyLostBlocks, l.IndirectlyLostBytes,
		l.IndirectlyLostBlocks, l.PossiblyLostBytes, l.PossiblyLostBlocks, l.StillReachableBytes,
		l.StillReachableBlocks)
	return w.skippable(KindLeakScan, w.body, l.Time)
}

// LeakBlocks writes the classes of lost blocks, in records of at most
// MaxLeakBlocks. The blocks must be in increasing order of address, each
// of a lost class; an indirectly lost one must name its leader.
func (w *Writer) LeakBlocks(l LeakBlocks) error {
	for i, b := range l.Blocks {
		switch {
		case i > 0 && b.Addr <= l.Blocks[i-1].Addr:
			return fmt.Errorf("writing leak blocks: block 0x%x is not after 0x%x", b.Addr, l.Blocks[i-1].Addr)
		case b.Class != DefinitelyLost && b.Class != IndirectlyLost && b.Class != PossiblyLost:
			return fmt.Errorf("writing leak blocks: block 0x%x: %v is not a lost class", b.Addr, b.Class)
		case (b.Class == IndirectlyLost) != (b.Leader != 0):
			return fmt.Errorf("writing leak blocks: block 0x%x is %v with leader 0x%x", b.Addr, b.Class, b.Leader)
		}
	}
	for start := 0; start == 0 || start < len(l.Blocks); start += MaxLeakBlocks {
		blocks := l.Blocks[start:min(start+MaxLeakBlocks, len(l.Blocks))]
		b := appendUvarints(w.body[:0], l.Process, uint64(len(blocks)))
		prev := uint64(0)
		for _, blk := range blocks {
			b = appendUvarints(b, blk.Addr-prev, uint64(blk.Class))
			if blk.Class == IndirectlyLost {
				b = binary.AppendVarint(b, int64(blk.Leader-blk.Addr))
			}
			prev = blk.Addr
		}
		w.body = b
		if err := w.skippable(KindLeakBlocks, w.body, 0); err != nil {
			return err
		}
	}
	return nil
}

// LeakOrigins writes where the leaks of definitely lost blocks were made,
// in records of at most MaxLeakBlocks; one record even if there are none,
// to say that they were looked for. The blocks must be in increasing
// order of address.
func (w *Writer) LeakOrigins(l LeakOrigins) error {
	for i, o := range l.Origins {
		if i > 0 && o.Addr <= l.Origins[i-1].Addr {
			return fmt.Errorf("writing leak origins: block 0x%x is not after 0x%x", o.Addr, l.Origins[i-1].Addr)
		}
	}
	for start := 0; start == 0 || start < len(l.Origins); start += MaxLeakBlocks {
		origins := l.Origins[start:min(start+MaxLeakBlocks, len(l.Origins))]
		b := appendUvarints(w.body[:0], l.Process, uint64(len(origins)))
		prev := uint64(0)
		for _, o := range origins {
			b = binary.AppendUvarint(b, o.Addr-prev)
			b = binary.AppendVarint(b, int64(o.Parent-o.Addr))
			b = appendUvarints(b, o.Time, o.Thread, o.Stack)
			prev = o.Addr
		}
		w.body = b
		if err := w.skippable(KindLeakOrigins, w.body, 0); err != nil {
			return err
		}
	}
	return nil
}

// Warning writes a recorder's warning about a process. Its record is
// skippable.
func (w *Writer) Warning(x Warning) error {
	w.body = appendString(appendUvarints(w.body[:0], x.Process), x.Message)
	return w.skippable(KindWarning, w.body, 0)
}

// skippable writes a record of a skippable kind: its body, after its
// length.
func (w *Writer) skippable(k Kind, body []byte, t uint64) error {
	b := binary.AppendUvarint(w.begin(k), uint64(len(body)))
	return w.finish(append(b, body...), t)
}

// Lost writes that events of a process are known to be missing.
func (w *Writer) Lost(l Lost) error {
	b := w.begin(KindLost)
	b = appendUvarints(b, l.Process, l.Count)
	b = appendString(b, l.Reason)
	return w.finish(b, 0)
}

// Fork writes that a process forked.
func (w *Writer) Fork(f Fork) error {
	b := w.begin(KindFork)
	b = appendUvarints(b, f.Process, f.Child, f.Time)
	return w.finish(b, 0)
}

// Write writes any record but Info, which only NewWriter writes. An End
// record written here replaces the one Close would write; copying tools and
// tests use that to reproduce a trace exactly.
func (w *Writer) Write(r Record) error {
	if r.Kind.IsEvent() {
		return w.Event(r.Event)
	}
	switch r.Kind {
	case KindProcessStart:
		return writeValue(w.ProcessStart, r.Kind, r.Process)
	case KindProcessEnd:
		return writeValue(w.ProcessEnd, r.Kind, r.ProcessEnd)
	case KindThread:
		return writeValue(w.Thread, r.Kind, r.Thread)
	case KindThreadEnd:
		return writeValue(w.ThreadEnd, r.Kind, r.ThreadEnd)
	case KindThreadStack:
		return writeValue(w.ThreadStack, r.Kind, r.ThreadStack)
	case KindObject:
		return writeValue(w.Object, r.Kind, r.Object)
	case KindModule:
		return writeValue(w.Module, r.Kind, r.Module)
	case KindModuleUnload:
		return writeValue(w.ModuleUnload, r.Kind, r.ModuleUnload)
	case KindStackNode:
		return writeValue(w.StackNode, r.Kind, r.StackNode)
	case KindString:
		return writeValue(w.String, r.Kind, r.String)
	case KindSymbol:
		return writeValue(w.Symbol, r.Kind, r.Symbol)
	case KindObjectStatus:
		return writeValue(w.ObjectStatus, r.Kind, r.ObjectStatus)
	case KindType:
		return writeValue(w.Type, r.Kind, r.Type)
	case KindStackCalls:
		return writeValue(w.StackCalls, r.Kind, r.StackCalls)
	case KindDeepestStack:
		return writeValue(w.DeepestStack, r.Kind, r.DeepestStack)
	case KindLeakScan:
		return writeValue(w.LeakScan, r.Kind, r.LeakScan)
	case KindLeakBlocks:
		return writeValue(w.LeakBlocks, r.Kind, r.LeakBlocks)
	case KindLeakOrigins:
		return writeValue(w.LeakOrigins, r.Kind, r.LeakOrigins)
	case KindWarning:
		return writeValue(w.Warning, r.Kind, r.Warning)
	case KindLost:
		return writeValue(w.Lost, r.Kind, r.Lost)
	case KindFork:
		return writeValue(w.Fork, r.Kind, r.Fork)
	case KindEnd:
		return writeValue(w.end, r.Kind, r.End)
	}
	return fmt.Errorf("writing record: cannot write a %v record", r.Kind)
}

// writeValue writes *v, which a record of kind k must carry.
func writeValue[T any](write func(T) error, k Kind, v *T) error {
	if v == nil {
		return fmt.Errorf("writing record: %v record has no value", k)
	}
	return write(*v)
}

// Flush ends the current block and waits until it and all blocks before it
// have been written to the underlying writer.
func (w *Writer) Flush() error {
	if err := w.check(); err != nil {
		return err
	}
	if err := w.endBlock(); err != nil {
		return err
	}
	w.pipe.wait()
	return w.check()
}

// Close writes the End record, unless one was written with Write, and
// flushes. It does not close the underlying writer.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	if !w.endWritten {
		if err := w.end(End{Time: w.lastTime, Events: w.events}); err != nil {
			return err
		}
	}
	err := w.Flush()
	w.closed = true
	w.pipe.recycleStreams(w.s) // empty: Flush sent the last block
	w.s = streamSet{}
	w.pipe.releaseSpare()
	w.heaps.recycle()
	w.heap = nil
	return err
}

func (w *Writer) info(i Info) error {
	b := w.begin(KindInfo)
	b = binary.AppendVarint(b, i.StartUnixNano)
	b = appendUvarints(b, i.TimeUnit)
	b = appendString(b, i.Hostname)
	b = appendString(b, i.Recorder)
	b = binary.AppendUvarint(b, i.MaxFrames)
	b = appendStrings(b, i.Command)
	return w.finish(b, 0)
}

func (w *Writer) end(e End) error {
	b := w.begin(KindEnd)
	b = appendUvarints(b, e.Time, e.Events)
	if err := w.finish(b, 0); err != nil {
		return err
	}
	w.endWritten = true
	return nil
}

// check returns the sticky error, picking up a failure of the background
// writes.
func (w *Writer) check() error {
	if w.err == nil && w.pipe.failed.Load() {
		w.err = w.pipe.error()
	}
	if w.err == nil && w.closed {
		return errWriterClosed
	}
	return w.err
}

// begin starts encoding a non-event record. Such records are encoded apart
// from the block so that one too big for the current block can start the
// next one. Most do not depend on the state of the block; those that do go
// through finishCoded.
func (w *Writer) begin(k Kind) []byte {
	return append(w.rec[:0], byte(k))
}

// finish appends the record encoded in rec to the block, after ending the
// run of events before it. t is a time in ns the record carries, for End.
func (w *Writer) finish(rec []byte, t uint64) error {
	w.rec = rec
	if _, err := w.makeRoom(rec); err != nil {
		return err
	}
	return w.appendRecord(rec, t)
}

// finishCoded appends a record that encode encodes against the record state
// of the block. The state moves on only once the record is in a block: if
// the record has to start a new block, it is encoded again against the new
// block's fresh state.
func (w *Writer) finishCoded(k Kind, encode func(b []byte, s *recordState) []byte) error {
	s := w.coded
	rec := encode(w.begin(k), &s)
	w.rec = rec
	ended, err := w.makeRoom(rec)
	if err != nil {
		return err
	}
	if ended {
		s = w.coded
		rec = encode(w.begin(k), &s)
		w.rec = rec
		if _, err := w.makeRoom(rec); err != nil {
			return err
		}
	}
	w.coded = s
	return w.appendRecord(rec, 0)
}

// makeRoom ends the block if rec does not fit in it, and reports whether it
// did.
func (w *Writer) makeRoom(rec []byte) (ended bool, err error) {
	if err := w.check(); err != nil {
		return false, err
	}
	if len(rec) > w.maxRaw-maxEventSize {
		return false, fmt.Errorf("writing %v record: %d bytes is more than a block can hold", Kind(rec[0]), len(rec))
	}
	if w.s.rawLen()+maxEventSize+len(rec) > w.maxRaw {
		return true, w.endBlock()
	}
	return false, nil
}

// appendRecord appends rec to the block, after ending the run of events
// before it.
func (w *Writer) appendRecord(rec []byte, t uint64) error {
	w.endRun()
	w.s[streamRecords] = append(w.s[streamRecords], rec...)
	w.lastTime = max(w.lastTime, t)
	if w.blockFull() {
		return w.endBlock()
	}
	return nil
}

func (w *Writer) blockSize() int {
	if w.BlockSize <= 0 {
		return DefaultBlockSize
	}
	// Cutting at half the limit leaves room for any event after it.
	return min(w.BlockSize, w.maxRaw/2)
}

// endBlock hands the current block to the background and starts a new one
// with fresh event state.
func (w *Writer) endBlock() error {
	w.endRun()
	if w.s.rawLen() == 0 {
		return w.check()
	}
	w.pipe.send(w.out, w.s, !w.Uncompressed)
	w.s = w.pipe.streams()
	w.checkAt = 0
	w.haveContext = false
	w.process, w.thread = 0, 0
	w.heap = nil
	w.heaps.reset()
	w.time, w.timeEnd, w.prevStack, w.prevRaw = 0, 0, 0, 0
	w.stackUse.reset()
	w.coded = recordState{}
	return w.check()
}

// pipeline compresses and writes finished blocks in background goroutines,
// one per block, that write in the order the blocks were sent.
type pipeline struct {
	slots    chan struct{} // one token per block in flight
	lastDone chan struct{} // closed once the last block sent has been written
	// spare holds the stream sets of blocks written, for the next blocks
	// of this Writer: setPool loses its content at every other garbage
	// collection, and streams grown anew fault their memory in again.
	spare chan streamSet

	failed atomic.Bool
	mu     sync.Mutex
	err    error
}

func (p *pipeline) init() {
	p.slots = make(chan struct{}, blocksInFlight)
	p.spare = make(chan streamSet, blocksInFlight+1)
}

// Stream sets and buffers are reused, by all Writers: the streams of a
// block grow to megabytes, and growing them from nothing in every new
// Writer copies and clears tens of MiB.
var (
	setPool    sync.Pool // of *streamSet
	bufferPool sync.Pool // of *[]byte
)

// getBuffer returns an empty buffer with room for size bytes, reusing one
// if it can.
func getBuffer(size int) []byte {
	if b, ok := bufferPool.Get().(*[]byte); ok {
		if cap(*b) >= size {
			return (*b)[:0]
		}
		bufferPool.Put(b) // for a smaller need
	}
	return make([]byte, 0, size)
}

func putBuffer(b []byte) {
	bufferPool.Put(&b)
}

// streams returns empty streams, reusing the memory of a block already
// written if it can.
func (p *pipeline) streams() streamSet {
	select {
	case s := <-p.spare:
		for i := range s {
			s[i] = s[i][:0]
		}
		return s
	default:
	}
	if s, ok := setPool.Get().(*streamSet); ok {
		for i := range s {
			s[i] = s[i][:0]
		}
		return *s
	}
	return streamSet{}
}

// releaseSpare gives the spare stream sets to the Writers to come.
func (p *pipeline) releaseSpare() {
	for {
		select {
		case s := <-p.spare:
			setPool.Put(&s)
		default:
			return
		}
	}
}

// recycleStreams gives the memory of s for later blocks to reuse.
func (p *pipeline) recycleStreams(s streamSet) {
	select {
	case p.spare <- s:
	default:
		setPool.Put(&s)
	}
}

// send hands the streams of a block to a goroutine that compresses them,
// waits for the block before it to be written, then writes it. It blocks
// while blocksInFlight blocks are still on their way.
func (p *pipeline) send(out io.Writer, s streamSet, compress bool) {
	p.slots <- struct{}{}
	prev := p.lastDone
	done := make(chan struct{})
	p.lastDone = done
	go func() {
		scratch := getBuffer(0)
		block, scratch := appendBlock(getBuffer(blockHeaderSize+maxStreamTable+s.rawLen()), &s, compress, scratch)
		putBuffer(scratch)
		p.recycleStreams(s)
		if prev != nil {
			<-prev
		}
		if !p.failed.Load() {
			if _, err := out.Write(block); err != nil {
				p.fail(fmt.Errorf("writing trace block: %w", err))
			}
		}
		putBuffer(block)
		close(done)
		<-p.slots
	}()
}

// wait returns once every block sent has been written or dropped.
func (p *pipeline) wait() {
	if p.lastDone != nil {
		<-p.lastDone
	}
}

func (p *pipeline) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
	p.failed.Store(true)
}

func (p *pipeline) error() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func appendUvarints(b []byte, vs ...uint64) []byte {
	for _, v := range vs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

// uvarintLen returns how many bytes v takes as a uv.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}
