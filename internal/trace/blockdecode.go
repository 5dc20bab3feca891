package trace

import (
	"fmt"
	"slices"
	"sync/atomic"
)

// blockDecoder decodes the records and events of one sound block into
// batches (see batch), all but the addresses of the events and their
// handles: an addressDecoder decodes those behind it, on another
// goroutine, and it checks that the streams hold all that the
// addressDecoder will read. Every block decodes on its own, since all of
// the state below starts afresh in it (docs/format.md, Block state): the
// Reader runs a blockDecoder per block, each on a goroutine of its own
// (see readAhead), and takes their batches in order.
type blockDecoder struct {
	d      decoder      // the records stream
	cols   eventStreams // and the event streams
	offset int64        // file offset of the block
	block  uint32       // its number among the sound blocks of the file, from 1: Event.Block

	process, thread uint64
	time            uint64 // in units, as the block's Time records have moved it
	eventTime       uint64 // time × unit: the time of the events, in ns
	run             uint64 // events left in the current Events record
	runAt, runLen   uint64 // where that record is, and its count
	why             string // why the event being decoded is damaged
	prevStack       uint64
	prevRaw         uint64      // the latest address of the raw stream
	coded           recordState // for StackNode and Symbol records

	// unit is Info.TimeUnit: that of the latest Info of the block or,
	// while the block has had none (inherited), the unit of the blocks
	// before it as far as the decoder can know: unitHint. The Reader
	// corrects the times of inherited events if that was wrong.
	unit      uint64
	inherited bool
	unitHint  *atomic.Uint64 // the TimeUnit of the latest Info any block decoded
	unitSet   uint64         // the TimeUnit the record being decoded set, if it set one
	sawEnd    bool

	out *batch // the batch being filled
}

// batchEvents is how many events a batch holds at most: small enough
// that the batches of a few blocks in flight take a few MiB, big enough
// that handing one over costs nothing next to decoding it.
const batchEvents = 2048

// batch is a stretch of a block, decoded: its events, and the other
// records and the damage among them, in order. A batch also says what the
// Reader needs to correct the times of events decoded before the unit of
// their time was known (see blockDecoder.unit).
type batch struct {
	events []Event
	others []placed
	runs   []runSegment // where the events of each Events record start
	// addrValues holds the values of the address columns the events
	// read, in order, for the addressDecoder: each reference code, and
	// after a code 0 the address from the raw stream; each address code,
	// and after a code 0 the address from the raw stream, after
	// addrSource the depth.
	addrValues []uint64
	hasEnd     bool // others ends with End

	// The first inherited events were decoded with the time unit
	// assumedUnit, and marks says where their time moves on, in units.
	inherited   int
	assumedUnit uint64
	marks       []timeMark
	unitSet     uint64 // the TimeUnit an Info of the batch set last, 0 if none
}

// placed is a record or damage of a batch, and where it comes among the
// batch's events: before events[at].
type placed struct {
	at   int
	rec  Record // if err is nil
	err  error
	unit uint64 // the TimeUnit it set, if it is an Info (damaged or not) that did
}

// runSegment is where the events of a batch from one Events record start,
// and what the addressDecoder needs to report damage among them as the
// blockDecoder would.
type runSegment struct {
	at            int    // the index in the batch's events of the first
	first         uint64 // its number in its Events record, from 1
	ops           int    // the position of its op byte in the ops stream
	runAt, runLen uint64 // the position in the records stream of the Events record, and its count
	recordsAfter  int    // the position in the records stream after the Events record
}

// timeMark says that from events[at] of a batch on, events were at units
// time units.
type timeMark struct {
	at    int
	units uint64
}

func (b *batch) reset() {
	b.events = b.events[:0]
	clear(b.others) // the records' pointers are the caller's now
	b.others = b.others[:0]
	b.runs = b.runs[:0]
	b.addrValues = b.addrValues[:0]
	b.hasEnd = false
	b.marks = b.marks[:0]
	b.inherited, b.assumedUnit, b.unitSet = 0, 0, 0
}

// setUnit corrects the times of the inherited events of b, which were
// decoded with b.assumedUnit, to unit. (Damage may have cut b short
// before some of its marks.)
func (b *batch) setUnit(unit uint64) {
	for i, m := range b.marks {
		end := b.inherited
		if i+1 < len(b.marks) {
			end = min(end, b.marks[i+1].at)
		}
		ns := m.units * unit
		for j := m.at; j < end; j++ {
			b.events[j].Time = ns
		}
	}
	b.assumedUnit = unit
}

// newBlockDecoder returns a decoder of the block f, the block-th sound
// block of the file.
func newBlockDecoder(f *fetched, block uint32, unitHint *atomic.Uint64) *blockDecoder {
	r := &blockDecoder{
		d:         decoder{p: f.streams[streamRecords]},
		offset:    f.offset,
		block:     block,
		unit:      unitHint.Load(),
		inherited: true,
		unitHint:  unitHint,
	}
	for k := range f.streams {
		r.cols.c[k].p = f.streams[k]
	}
	return r
}

// fill decodes the next records and events of the block into b, which is
// empty, until b holds batchEvents events or the block ends. It reports
// whether the block has more to decode. A block ends with its records
// stream, with damage, which skips the rest of it, or with End.
func (r *blockDecoder) fill(b *batch) bool {
	r.out = b
	if r.inherited {
		b.assumedUnit = r.unit
		b.marks = append(b.marks, timeMark{at: 0, units: r.time})
	}
	defer r.endBatch(b)
	for len(b.events) < batchEvents {
		switch {
		case r.run > 0:
			r.decodeRun(b)
		case r.sawEnd:
			return false
		case r.d.i >= len(r.d.p):
			r.endBlock(b)
			return false
		default:
			r.nextRecord(b)
		}
	}
	return true
}

func (r *blockDecoder) endBatch(b *batch) {
	if r.inherited {
		b.inherited = len(b.events)
	}
	r.out = nil
}

// nextRecord decodes the record at the current position of the records
// stream into b. Events and Time records come every few events: they,
// and Context records, are decoded without a Record.
func (r *blockDecoder) nextRecord(b *batch) {
	if k := Kind(r.d.p[r.d.i]); k == kindEvents || k == KindTime || k == KindContext {
		if err := r.control(); err != nil {
			b.others = append(b.others, placed{at: len(b.events), err: err})
		}
		return
	}
	r.unitSet = 0
	rec, err := r.record()
	if err != nil || rec.Kind != KindInvalid { // KindInvalid: skipped
		b.others = append(b.others, placed{at: len(b.events), rec: rec, err: err, unit: r.unitSet})
	}
	b.hasEnd = r.sawEnd
}

// endBlock checks that the records of the block used all of its events.
func (r *blockDecoder) endBlock(b *batch) {
	if n := r.cols.unread(); n > 0 {
		r.cols.skip()
		err := &DamageError{Offset: r.offset, BytesSkipped: int64(n),
			Reason: fmt.Sprintf("%d bytes of the event streams belong to no events record", n)}
		b.others = append(b.others, placed{at: len(b.events), err: err})
	}
}

// control decodes the Context, Time or Events record at the current
// position of the records stream, and those that follow it up to the next
// events: records that only change the state of the decoder.
func (r *blockDecoder) control() error {
	d := &r.d
	for {
		start := d.i
		k := Kind(d.p[d.i])
		d.i++
		switch k {
		case KindContext:
			r.process, r.thread = d.uv(), d.uv()
		case KindTime:
			r.time += d.uv()
			r.eventTime = r.time * r.unit
			if r.inherited {
				r.out.marks = append(r.out.marks, timeMark{at: len(r.out.events), units: r.time})
			}
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

// setUnit takes in the time unit of an Info record of the block.
func (r *blockDecoder) setUnit(unit uint64) {
	r.unit = unit
	r.eventTime = r.time * r.unit
	if r.inherited {
		r.out.inherited = len(r.out.events)
		r.inherited = false
	}
	r.out.unitSet, r.unitSet = unit, unit
	r.unitHint.Store(unit)
}

// record decodes the record at the current position of the records stream,
// one that control does not. It returns a record of KindInvalid for records
// that are skipped.
func (r *blockDecoder) record() (Record, error) {
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
func (r *blockDecoder) recordDamaged(k Kind, start int) error {
	r.run = 0
	return r.damaged(start, fmt.Sprintf("%s record at byte %d of the records stream: %s", wireName(k), start, r.d.bad))
}

// damaged reports damage in the block, at byte start of its records
// stream. The rest of the block is skipped: without the record's length
// nothing after it can be found, and the events after it may depend on
// it.
func (r *blockDecoder) damaged(start int, reason string) error {
	err := &DamageError{
		Offset:       r.offset,
		BytesSkipped: int64(len(r.d.p)-start) + int64(r.cols.unread()),
		Reason:       reason,
	}
	r.d.i, r.d.bad = len(r.d.p), ""
	r.cols.skip()
	return err
}

// decodeRun decodes events of the current Events record into b, as many
// as b has room for, but for their addresses and handles.
//
// This is the hot loop of every analysis. The events are decoded a chunk
// at a time, column by column (decodeChunk): each column is then a loop
// of its own, over events still in the cache, with its position in
// registers. Only where decodeChunk meets damage are the events of the
// chunk decoded again one by one (event), to find the event that is
// damaged and why, as docs/format.md says to.
func (r *blockDecoder) decodeRun(b *batch) {
	n := int(min(r.run, uint64(batchEvents-len(b.events))))
	start := len(b.events)
	if cap(b.events)-start < n {
		b.events = append(b.events[:cap(b.events)], make([]Event, start+n-cap(b.events))...)
	}
	b.events = b.events[:start+n]
	b.runs = append(b.runs, runSegment{at: start, first: r.runLen - r.run + 1, ops: r.cols.c[streamOps].i,
		runAt: r.runAt, runLen: r.runLen, recordsAfter: r.d.i})
	for at := start; at < start+n; {
		chunk := b.events[at:min(at+chunkEvents, start+n)]
		if !r.decodeChunk(b, chunk) {
			for i := range chunk {
				if !r.event(&chunk[i]) {
					b.events = b.events[:at+i]
					r.run -= uint64(at + i - start)
					b.others = append(b.others, placed{at: len(b.events), err: r.eventDamaged()})
					return
				}
			}
		}
		at += len(chunk)
	}
	r.run -= uint64(n)
}

// chunkEvents is how many events decodeChunk decodes at a time: few
// enough that they stay in the L1 cache from one column to the next.
const chunkEvents = 128

// decodeChunk decodes the next len(events) events of the current run into
// events, but for their addresses and handles, and passes on the values
// of their address columns in b.addrValues. If it finds damage, it leaves
// r, b and the streams as they were, and returns false.
func (r *blockDecoder) decodeChunk(b *batch, events []Event) bool {
	c := &r.cols
	ops := &c.c[streamOps]
	// The Events record checked that the ops stream holds a byte for
	// every event of the run.
	opBytes := ops.p[ops.i : ops.i+len(events)]
	var highest byte // the highest op kind less 1, 0xff for kind 0
	for i, op := range opBytes {
		e := &events[i]
		kind := op >> opShift
		highest = max(highest, kind-1)
		// Every field is set once, on its own: e held another event
		// before, and a struct literal is built on the stack and copied,
		// which costs more than decoding most events.
		e.Kind, e.API, e.Block = KindContext+Kind(kind), API(op&apiMask), r.block
		e.Process, e.Thread, e.Time = r.process, r.thread, r.eventTime
	}
	if highest >= opRealloc {
		return false // an op byte has no event kind
	}
	p, tails, i, j := c.columnAt(streamStack)
	prevStack, ok := r.prevStack, true
	for k := range events {
		var v uint64
		if v, i, j, ok = shortVarint(p, tails, i, j); !ok {
			if v, i, j, ok = longVarint(p, tails, i, j); !ok {
				return false
			}
		}
		prevStack += unzigzag(v)
		events[k].Stack = prevStack
	}
	stackAt, stackTailsAt := i, j
	p, tails, i, j = c.columnAt(streamSize)
	for k := range events {
		e := &events[k]
		var size uint64
		if e.Kind != KindFree {
			if size, i, j, ok = shortVarint(p, tails, i, j); !ok {
				if size, i, j, ok = longVarint(p, tails, i, j); !ok {
					return false
				}
			}
		}
		e.Size = size
	}
	sizeAt, sizeTailsAt := i, j
	values, ok := r.chunkAddrValues(b.addrValues, events)
	if !ok {
		return false
	}
	b.addrValues = values
	ops.i += len(events)
	c.setColumnAt(streamStack, stackAt, stackTailsAt)
	c.setColumnAt(streamSize, sizeAt, sizeTailsAt)
	r.prevStack = prevStack
	return true
}

// chunkAddrValues appends to values the values of the address columns
// that events read (see batch.addrValues), and returns false if it finds
// damage. The positions of the columns move only if it does not.
func (r *blockDecoder) chunkAddrValues(values []uint64, events []Event) ([]uint64, bool) {
	c := &r.cols
	refs, refTails, ri, rj := c.columnAt(streamRef)
	addrs, addrTails, ai, aj := c.columnAt(streamAddr)
	raws, rawTails, wi, wj := c.columnAt(streamRawAddr)
	prevRaw := r.prevRaw
	// An event passes on four values at most: an escaped reference and an
	// escaped address.
	n := len(values)
	values = slices.Grow(values, 4*len(events))[:n+4*len(events)]
	var code, v uint64
	ok := true
	for k := range events {
		kind := events[k].Kind
		if kind != KindAlloc {
			if code, ri, rj, ok = shortVarint(refs, refTails, ri, rj); !ok {
				if code, ri, rj, ok = longVarint(refs, refTails, ri, rj); !ok {
					return nil, false
				}
			}
			values[n] = code
			n++
			if code == refEscape {
				if v, wi, wj, ok = longVarint(raws, rawTails, wi, wj); !ok {
					return nil, false
				}
				prevRaw += unzigzag(v)
				values[n] = prevRaw
				n++
			}
		}
		if kind != KindFree {
			if code, ai, aj, ok = shortVarint(addrs, addrTails, ai, aj); !ok {
				if code, ai, aj, ok = longVarint(addrs, addrTails, ai, aj); !ok {
					return nil, false
				}
			}
			values[n] = code
			n++
			switch code {
			case addrEscape:
				if v, wi, wj, ok = longVarint(raws, rawTails, wi, wj); !ok {
					return nil, false
				}
				prevRaw += unzigzag(v)
				values[n] = prevRaw
				n++
			case addrSource:
				if v, ai, aj, ok = longVarint(addrs, addrTails, ai, aj); !ok {
					return nil, false
				}
				values[n] = v
				n++
			}
		}
	}
	c.setColumnAt(streamRef, ri, rj)
	c.setColumnAt(streamAddr, ai, aj)
	c.setColumnAt(streamRawAddr, wi, wj)
	r.prevRaw = prevRaw
	return values[:n], true
}

// event decodes the next event of the current run into e, but for its
// addresses and handles, which the addressDecoder sets from the values of
// the address columns that event passes on in r.out.addrValues. If the
// event is damaged, it notes why in r.why and returns false. It is
// decodeChunk one event at a time, for where that found damage.
func (r *blockDecoder) event(e *Event) bool {
	c := &r.cols
	ops := &c.c[streamOps]
	op := ops.p[ops.i]
	ops.i++
	e.API, e.Block = API(op&apiMask), r.block
	e.Process, e.Thread, e.Time = r.process, r.thread, r.eventTime
	switch op >> opShift {
	case opAlloc:
		e.Kind = KindAlloc
		e.Size = c.uv(streamSize)
		r.addrValues()
	case opFree:
		e.Kind = KindFree
		e.Size = 0
		r.refValues()
	case opRealloc:
		e.Kind = KindRealloc
		r.refValues()
		e.Size = c.uv(streamSize)
		r.addrValues()
	default:
		r.why = fmt.Sprintf("op byte 0x%02x has no event kind", op)
		return false
	}
	stack := c.uv(streamStack)
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

// addrValues passes on the values of the address of a new block: its
// code and what the code says follows it.
func (r *blockDecoder) addrValues() {
	code := r.cols.uv(streamAddr)
	switch code {
	case addrEscape:
		r.out.addrValues = append(r.out.addrValues, code, r.rawAddr())
	case addrSource:
		r.out.addrValues = append(r.out.addrValues, code, r.cols.uv(streamAddr))
	default:
		r.out.addrValues = append(r.out.addrValues, code)
	}
}

// refValues passes on the values of the address of a block being
// released.
func (r *blockDecoder) refValues() {
	code := r.cols.uv(streamRef)
	if code == refEscape {
		r.out.addrValues = append(r.out.addrValues, code, r.rawAddr())
		return
	}
	r.out.addrValues = append(r.out.addrValues, code)
}

// rawAddr reads the next address of the raw stream.
func (r *blockDecoder) rawAddr() uint64 {
	r.prevRaw += unzigzag(r.cols.uv(streamRawAddr))
	return r.prevRaw
}

// eventDamaged reports the damaged event of the current run that event
// failed on. To say exactly how much is skipped, it finds where the event
// starts by going through the events of the block before it again: as
// many as the op bytes before the one event read, each event having one.
// (Noting where each run starts would cost every run; damage is rare.)
func (r *blockDecoder) eventDamaged() error {
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
