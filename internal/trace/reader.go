package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Reader reads a trace file record by record. While the records of one
// block are decoded, a background goroutine reads and decompresses the next
// block.
//
// Damage is reported, never fatal: Next returns a *DamageError for a
// damaged or truncated part of the file, and the call after that goes on
// with the next readable block. A Reader is not safe for concurrent use.
type Reader struct {
	src   *source
	ahead chan fetched // receives the block being read ahead
	spare []byte       // buffer to decode the next block's streams into

	buf    []byte       // the current block's streams
	d      decoder      // its records stream
	cols   eventStreams // and its event streams
	offset int64        // file offset of the current block

	// State of the current block.
	process, thread    uint64
	time               uint64 // in units, as the block's Time records have moved it
	eventTime          uint64 // time × unit: the time of the events, in ns
	run                uint64 // events left in the current Events record
	runAt, runLen      uint64 // where that record is, and its count
	why                string // why the event being decoded is damaged
	heap               *heapState
	heaps              heapStates
	ti                 uint32 // the index of thread in heap.threads, if haveThread
	haveThread         bool
	prevStack, prevRaw uint64
	coded              recordState // for StackNode and Symbol records

	unit               uint64 // Info.TimeUnit; 1 until Info is read
	sawEnd             bool
	atEnd              bool // there are no more blocks
	lastDamaged        bool // the last block read was damaged: End may have been in it
	incompleteReported bool
	err                error // the underlying reader failed
}

// eventStreams are the event streams of a block and how far each has been
// decoded.
type eventStreams struct {
	c   [numStreams]column // c[streamRecords] is not used here
	bad bool               // a read ran past the end of a stream or over 64 bits
}

// column is an event stream and how far it has been decoded.
type column struct {
	p []byte
	i int
}

// small reads the next value of the column if it fits in its one byte,
// which most do: small is cheap enough to be inlined, and the caller
// calls eventStreams.uvLong for the others.
func (c *column) small() (uint64, bool) {
	if i := c.i; i < len(c.p) && c.p[i] < 0x80 {
		c.i = i + 1
		return uint64(c.p[i]), true
	}
	return 0, false
}

// left returns how many bytes of the stream are left.
func (c *column) left() int { return max(0, len(c.p)-c.i) }

// uv reads a value of the varint column k.
func (s *eventStreams) uv(k int) uint64 {
	if v, ok := s.c[k].small(); ok {
		return v
	}
	return s.uvLong(k)
}

// uvLong reads a value of column k that goes on in its tails, or fails. A
// failure leaves the position of the stream at fault past its end, for
// overrun to find.
func (s *eventStreams) uvLong(k int) uint64 {
	c, tails := &s.c[k], &s.c[k+tailStreams]
	if c.i >= len(c.p) {
		c.i, s.bad = len(c.p)+1, true
		return 0
	}
	low := uint64(c.p[c.i] & 0x7f)
	c.i++
	if j := tails.i; j < len(tails.p) && tails.p[j] < 0x80 {
		// A tail of one byte, as most are: a value below 2^14.
		tails.i = j + 1
		return low | uint64(tails.p[j])<<7
	}
	tail, j := uvarint(tails.p, tails.i)
	if j > len(tails.p) || tail >= 1<<(64-7) {
		tails.i, s.bad = len(tails.p)+1, true
		return 0
	}
	tails.i = j
	return low | tail<<7
}

// skipEvent moves past an event that decoded without damage before.
func (s *eventStreams) skipEvent() {
	ops := &s.c[streamOps]
	op := ops.p[ops.i]
	ops.i++
	kind := op >> opShift
	if kind == opFree || kind == opRealloc {
		if s.uv(streamRef) == 0 {
			s.uv(streamRawAddr)
		}
	}
	if kind == opAlloc || kind == opRealloc {
		s.uv(streamSize)
		switch s.uv(streamAddr) {
		case addrEscape:
			s.uv(streamRawAddr)
		case addrSource:
			s.uv(streamAddr)
		}
	}
	s.uv(streamStack)
}

// overrun says which stream a failed read ran past the end of.
func (s *eventStreams) overrun() string {
	for k := streamOps; k < numStreams; k++ {
		if s.c[k].i > len(s.c[k].p) {
			return fmt.Sprintf("the %s stream runs out or holds a varint of more than 64 bits", streamNames[k])
		}
	}
	return ""
}

// unread returns how many bytes of the event streams are left.
func (s *eventStreams) unread() int {
	n := 0
	for k := streamOps; k < numStreams; k++ {
		n += s.c[k].left()
	}
	return n
}

// skip gives up on the rest of the event streams.
func (s *eventStreams) skip() {
	for k := range s.c {
		s.c[k].i = len(s.c[k].p)
	}
}

// rewind goes back to the start of the streams.
func (s *eventStreams) rewind() {
	for k := range s.c {
		s.c[k].i = 0
	}
	s.bad = false
}

// NewReader checks the file header and starts reading ahead. It returns an
// error wrapping ErrNotTrace if r does not hold a trace, and a
// *VersionError if it holds one of a version this package cannot read.
func NewReader(r io.Reader) (*Reader, error) {
	var header [fileHeaderSize]byte
	n, err := io.ReadFull(r, header[:])
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		return nil, fmt.Errorf("empty file: %w", ErrNotTrace)
	case errors.Is(err, io.ErrUnexpectedEOF):
		if bytes.HasPrefix([]byte(Magic), header[:min(n, len(Magic))]) {
			return nil, fmt.Errorf("file of %d bytes is too short for a trace header: %w", n, ErrNotTrace)
		}
		return nil, ErrNotTrace
	case err != nil:
		return nil, fmt.Errorf("reading trace header: %w", err)
	}
	if string(header[:len(Magic)]) != Magic {
		return nil, ErrNotTrace
	}
	if v := binary.LittleEndian.Uint16(header[8:]); v != Version {
		return nil, &VersionError{Version: v}
	}
	tr := &Reader{
		src:   &source{r: r, offset: fileHeaderSize},
		ahead: make(chan fetched, 1),
		unit:  1,
	}
	tr.readAhead()
	return tr, nil
}

// Next returns the next record. It returns io.EOF after the End record, and
// ErrIncomplete (once, then io.EOF) if the file ends without one. A
// *DamageError is not fatal: call Next again to go on after the damage.
//
// Event records allocate nothing. The pointers in other records are new for
// each record; the caller may keep them.
func (r *Reader) Next() (rec Record, err error) {
	for !r.sawEnd {
		// Events are nearly all records: decode them first, without the
		// detour through record, which is the slower general path. (The
		// event is decoded in place: a copy of a Record costs more than
		// the decoding of most events.)
		if r.run > 0 {
			if !r.event(&rec.Event) {
				return Record{}, r.eventDamaged()
			}
			r.run--
			rec.Kind = rec.Event.Kind
			return rec, nil
		}
		if r.d.i >= len(r.d.p) {
			if err := r.endBlock(); err != nil {
				return Record{}, err
			}
			continue
		}
		// Events and Time records come every few events: decode them,
		// and Context records, without a Record to return.
		if k := Kind(r.d.p[r.d.i]); k == kindEvents || k == KindTime || k == KindContext {
			if err := r.control(); err != nil {
				return Record{}, err
			}
			continue
		}
		rec, err := r.record()
		if err != nil || rec.Kind != KindInvalid {
			return rec, err
		}
		// It was a skippable record: go on.
	}
	return Record{}, io.EOF
}

// readAhead starts reading the next block in the background.
func (r *Reader) readAhead() {
	src, buf, ahead := r.src, r.spare, r.ahead
	r.spare = nil
	go func() { ahead <- src.next(buf) }()
}

// endBlock checks that the records of the block used all of its events,
// then moves on to the next block.
func (r *Reader) endBlock() error {
	if n := r.cols.unread(); n > 0 {
		r.cols.skip()
		r.lastDamaged = true
		return &DamageError{Offset: r.offset, BytesSkipped: int64(n),
			Reason: fmt.Sprintf("%d bytes of the event streams belong to no events record", n)}
	}
	return r.nextBlock()
}

// nextBlock moves on to the block read ahead, starts reading the one after
// it, and resets the event state.
func (r *Reader) nextBlock() error {
	if r.atEnd {
		return r.endOfFile()
	}
	f := <-r.ahead
	if f.err != nil {
		r.atEnd = true
		r.err = fmt.Errorf("reading trace: %w", f.err)
		return r.err
	}
	// The block just finished is done with: its buffer takes the next.
	if f.found {
		r.spare, r.buf = r.buf, f.buf
	} else {
		r.spare = r.buf
		if cap(f.buf) > cap(r.spare) {
			r.spare = f.buf
		}
		r.buf = nil
	}
	r.d = decoder{p: f.streams[streamRecords]}
	r.cols = eventStreams{}
	for k := range f.streams {
		r.cols.c[k].p = f.streams[k]
	}
	r.offset = f.offset
	r.process, r.thread, r.run = 0, 0, 0
	r.heap, r.haveThread = nil, false
	r.heaps.reset()
	r.time, r.eventTime, r.prevStack, r.prevRaw = 0, 0, 0, 0
	r.coded = recordState{}
	r.atEnd = f.atEnd
	if f.damage != nil {
		r.lastDamaged = true
	} else if f.found {
		r.lastDamaged = false
	}
	if !r.atEnd {
		r.readAhead()
	}
	if f.damage != nil {
		return f.damage
	}
	return nil
}

// endOfFile returns what Next returns once there are no more blocks. A
// trace that ends without End is incomplete only if it ends cleanly: after
// damage, End may have been in what was lost, and the damage has been
// reported.
func (r *Reader) endOfFile() error {
	switch {
	case r.err != nil:
		return r.err
	case r.sawEnd || r.lastDamaged || r.incompleteReported:
		return io.EOF
	}
	r.incompleteReported = true
	return ErrIncomplete
}

// control decodes the Context, Time or Events record at the current
// position of the records stream, and those that follow it up to the next
// events: records that only change the state of the reader.
func (r *Reader) control() error {
	d := &r.d
	for {
		start := d.i
		k := Kind(d.p[d.i])
		d.i++
		switch k {
		case KindContext:
			process := d.uv()
			if process != r.process {
				r.heap = nil
			}
			r.process, r.thread = process, d.uv()
			r.haveThread = false
		case KindTime:
			r.time += d.uv()
			r.eventTime = r.time * r.unit
		case kindEvents:
			// Every event has an op byte: a count the ops stream cannot
			// back is damage now rather than many events later.
			n := d.uv()
			if left := r.cols.c[streamOps].left(); n > uint64(left) {
				d.fail(fmt.Sprintf("count %d is more than the %d events left in the ops stream", n, left))
			}
			r.run, r.runAt, r.runLen = n, uint64(start), n
		}
		if d.bad != "" {
			return r.recordDamaged(k, start)
		}
		if r.run > 0 || d.i >= len(d.p) {
			return nil
		}
		if k := Kind(d.p[d.i]); k != kindEvents && k != KindTime && k != KindContext {
			return nil
		}
	}
}

// record decodes the record at the current position of the records stream,
// one that control does not. It returns a record of KindInvalid for records
// that are skipped.
func (r *Reader) record() (Record, error) {
	d := &r.d
	start := d.i
	k := Kind(d.p[d.i])
	d.i++
	rec := r.other(k)
	if d.bad != "" {
		return Record{}, r.recordDamaged(k, start)
	}
	return rec, nil
}

// recordDamaged reports that the record of kind k at byte start of the
// records stream is damaged.
func (r *Reader) recordDamaged(k Kind, start int) error {
	r.run = 0
	return r.damaged(start, fmt.Sprintf("%s record at byte %d of the records stream: %s", wireName(k), start, r.d.bad))
}

// event decodes the next event of the current run into e. If the event is
// damaged, it notes why in r.why and returns false.
//
// This is the hot loop of every analysis: the Events record checked that
// the ops stream has a byte for the event, and reads past the end of the
// other streams are checked for once, at the end.
func (r *Reader) event(e *Event) bool {
	h := r.heap
	if h == nil {
		h = r.heaps.get(r.process)
		r.heap = h
	}
	if !r.haveThread {
		r.ti, r.haveThread = h.thread(r.thread), true
	}
	c := &r.cols
	ops := &c.c[streamOps]
	op := ops.p[ops.i]
	ops.i++
	e.API = API(op & apiMask)
	e.Process, e.Thread, e.Time = r.process, r.thread, r.eventTime
	switch op >> opShift {
	case opAlloc:
		e.Kind = KindAlloc
		size, ok := c.c[streamSize].small()
		if !ok {
			size = c.uvLong(streamSize)
		}
		e.Size = size
		e.Addr = r.addr(h, size)
	case opFree:
		e.Kind = KindFree
		e.Addr = r.ref(h)
	case opRealloc:
		e.Kind = KindRealloc
		e.OldAddr = r.ref(h)
		e.Size = c.uv(streamSize)
		e.Addr = r.addr(h, e.Size)
	default:
		r.why = fmt.Sprintf("op byte 0x%02x has no event kind", op)
		return false
	}
	stack, ok := c.c[streamStack].small()
	if !ok {
		stack = c.uvLong(streamStack)
	}
	if c.bad || r.why != "" {
		if c.bad {
			r.why = c.overrun()
		}
		return false
	}
	r.prevStack += unzigzag(stack)
	e.Stack = r.prevStack
	return true
}

// addr decodes the address of a new block of size bytes.
func (r *Reader) addr(h *heapState, size uint64) uint64 {
	var addr uint64
	c, ti := sizeClass(size), r.ti
	t := &h.threads[ti]
	code, ok := r.cols.c[streamAddr].small()
	if !ok {
		code = r.cols.uvLong(streamAddr)
	}
	switch {
	case code == addrEscape:
		addr = r.rawAddr()
		t.fresh(addr, size)
	case code == addrLastFreed:
		addr = h.lastFreed
	case code == addrSource:
		d := r.cols.uv(streamAddr)
		if addr, ok = h.takeAt(t.source, c, d); !ok {
			r.fail(fmt.Sprintf("address code %d, depth %d for size %d: %s", code, d, size, r.missing(&h.threads[t.source], c)))
			return 0
		}
	case code&1 == 1:
		d := (code - addrDepth) / 2
		if addr, ok = h.takeAt(ti, c, d); !ok {
			r.fail(fmt.Sprintf("address code %d for size %d: %s", code, size, r.missing(t, c)))
			return 0
		}
	default:
		addr = t.next + stepOf((code-addrStep)/2)
		t.fresh(addr, size)
	}
	h.allocate(ti, addr, c)
	return addr
}

// missing says why a class list has no address at the depth a code names.
func (r *Reader) missing(t *threadState, c uint8) string {
	switch {
	case c == 0:
		return "a size with no class list"
	case t.list(c) == nil:
		return "its class list is empty"
	}
	return "deeper than its class list"
}

// ref decodes the address of a block being released.
func (r *Reader) ref(h *heapState) uint64 {
	code, ok := r.cols.c[streamRef].small()
	if !ok {
		code = r.cols.uvLong(streamRef)
	}
	if code == refEscape {
		addr := r.rawAddr()
		h.lastFreed = addr
		return addr
	}
	num := h.handleOf(&h.threads[r.ti], code)
	if !h.live(num) {
		r.fail(fmt.Sprintf("handle %d is not live (reference code %d)", num, code))
		return 0
	}
	addr := h.handles[num].addr
	h.release(r.ti, uint32(num))
	return addr
}

func (r *Reader) rawAddr() uint64 {
	r.prevRaw += unzigzag(r.cols.uv(streamRawAddr))
	return r.prevRaw
}

// fail notes why the event being decoded is damaged, unless that is known
// already.
func (r *Reader) fail(why string) {
	if r.why == "" {
		r.why = why
	}
}

// other decodes a record that is not an event or one that control decodes.
func (r *Reader) other(k Kind) Record {
	d := &r.d
	rec := Record{Kind: k}
	switch k {
	case KindInfo:
		rec.Info = r.info()
	case KindProcessStart:
		rec.Process = &Process{ID: d.uv(), PID: d.uv(), PPID: d.uv(), Parent: d.uv(), Time: d.uv(),
			Exe: d.str(), Args: d.strs(), Cwd: d.str()}
	case KindProcessEnd:
		rec.ProcessEnd = &ProcessEnd{ID: d.uv(), Time: d.uv(), How: EndHow(d.enum()), Code: d.sv(), Lost: d.uv()}
	case KindThread:
		rec.Thread = &Thread{Process: d.uv(), Index: d.uv(), TID: d.uv(), Time: d.uv()}
	case KindThreadEnd:
		rec.ThreadEnd = &ThreadEnd{Process: d.uv(), Index: d.uv(), Time: d.uv()}
	case KindObject:
		rec.Object = &Object{ID: d.uv(), Path: d.str(), BuildID: d.bytesCopy()}
	case KindModule:
		rec.Module = r.module()
	case KindModuleUnload:
		rec.ModuleUnload = &ModuleUnload{Process: d.uv(), ID: d.uv(), Time: d.uv()}
	case KindStackNode:
		rec.StackNode = r.coded.stackNode(d)
	case KindString:
		rec.String = &String{ID: d.uv(), Value: d.str()}
	case KindSymbol:
		rec.Symbol = r.coded.symbol(d)
	case KindObjectStatus:
		rec.ObjectStatus = &ObjectStatus{Object: d.uv(), Status: SymbolStatus(d.enum()), Message: d.str()}
	case KindType:
		rec.Type = readType(d)
	case KindLost:
		rec.Lost = &Lost{Process: d.uv(), Count: d.uv(), Reason: d.str()}
	case KindFork:
		rec.Fork = &Fork{Process: d.uv(), Child: d.uv(), Time: d.uv()}
	case KindEnd:
		rec.End = &End{Time: d.uv(), Events: d.uv()}
		r.sawEnd = d.bad == ""
	default:
		r.skip(k)
		return Record{}
	}
	return rec
}

func (r *Reader) info() *Info {
	d := &r.d
	i := &Info{StartUnixNano: d.sv(), TimeUnit: d.uv(), Hostname: d.str(), Recorder: d.str(),
		MaxFrames: d.uv(), Command: d.strs()}
	if i.TimeUnit == 0 {
		d.fail("time unit is 0")
		return i
	}
	r.unit = i.TimeUnit
	r.eventTime = r.time * r.unit
	return i
}

func (r *Reader) module() *Module {
	d := &r.d
	m := &Module{Process: d.uv(), ID: d.uv(), Object: d.uv(), Base: d.uv(), Time: d.uv()}
	if n := d.count(4); n > 0 {
		m.Segments = make([]Segment, n)
		for i := range m.Segments {
			m.Segments[i] = Segment{Vaddr: d.uv(), Memsz: d.uv(), Offset: d.uv(), Flags: d.uv()}
		}
	}
	return m
}

// readType decodes a Type record. Bytes of its body after its fields are
// for fields a later version adds: they are skipped.
func readType(d *decoder) *Type {
	body := d.body()
	t := &Type{Object: body.uv(), Size: body.uv(), Name: body.str()}
	if body.bad != "" {
		d.fail(fmt.Sprintf("its fields do not fit in its length of %d bytes", len(body.p)))
	}
	return t
}

// skip skips a record of a kind this reader does not know, if its kind says
// it may be skipped.
func (r *Reader) skip(k Kind) {
	d := &r.d
	if k < KindFirstSkippable || k > kindLastSkippable {
		d.fail("unknown record kind")
		return
	}
	d.body()
}

// damaged reports damage in the current block, at byte start of its
// records stream. The rest of the block is skipped: without the record's
// length nothing after it can be found, and the events after it may depend
// on it.
func (r *Reader) damaged(start int, reason string) error {
	err := &DamageError{
		Offset:       r.offset,
		BytesSkipped: int64(len(r.d.p)-start) + int64(r.cols.unread()),
		Reason:       reason,
	}
	r.d.i, r.d.bad = len(r.d.p), ""
	r.cols.skip()
	r.lastDamaged = true
	return err
}

// eventDamaged reports the damaged event of the current run that event
// failed on. To say exactly how much is skipped, it finds where the event
// starts by going through the events of the block before it again: as
// many as the op bytes before the one event read, each event having one.
// (Noting where each run starts would cost every run; damage is rare.)
func (r *Reader) eventDamaged() error {
	c := &r.cols
	before := c.c[streamOps].i - 1
	c.rewind()
	for range before {
		c.skipEvent()
	}
	n := r.runLen - r.run + 1
	why := r.why
	r.run, r.why = 0, ""
	return r.damaged(r.d.i, fmt.Sprintf("events record at byte %d of the records stream: event %d of %d: %s", r.runAt, n, r.runLen, why))
}
