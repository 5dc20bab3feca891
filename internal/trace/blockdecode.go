package trace

import (
	"encoding/binary"
	"fmt"
	"math/bits"
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
	prevRaw         uint64 // the latest address of the raw stream
	stackUse        stackUsePredictor
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

// batchOthers is how many other records a batch takes in at most before
// it ends, for the same reasons: a placed record is about 300 bytes, and
// a program of deep call stacks (python3) has thousands of StackNode
// records between two runs of events, which grew a batch's others to
// MiBs.
const batchOthers = 512

// batch is a stretch of a block, decoded: its events, and the other
// records and the damage among them, in order. A batch also says what the
// Reader needs to correct the times of events decoded before the unit of
// their time was known (see blockDecoder.unit).
type batch struct {
	events []Event
	others []placed
	runs   []runSegment // where the events of each Events record start
	// The values of the address columns the events read, in order, for
	// the addressDecoder: refCodes holds the reference codes; addrCodes
	// the address codes, each addrSource followed by its depth; and raws
	// the addresses of the raw stream that codes 0 of either escape to.
	refCodes, addrCodes, raws []uint64
	hasEnd                    bool // others ends with End

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
	b.refCodes, b.addrCodes, b.raws = b.refCodes[:0], b.addrCodes[:0], b.raws[:0]
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
// empty, until b holds batchEvents events or batchOthers other records,
// or the block ends. It reports whether the block has more to decode. A
// block ends with its records stream, with damage, which skips the rest
// of it, or with End.
func (r *blockDecoder) fill(b *batch) bool {
	r.out = b
	if r.inherited {
		b.assumedUnit = r.unit
		b.marks = append(b.marks, timeMark{at: 0, units: r.time})
	}
	defer r.endBatch(b)
	for len(b.events) < batchEvents && len(b.others) < batchOthers {
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
			r.stackUse.context(r.process, r.thread)
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
// registers. Short chunks are decoded one by one (event), and so are
// the events of a chunk where decodeChunk meets damage, again, to find
// the event that is damaged and why, as docs/format.md says to.
func (r *blockDecoder) decodeRun(b *batch) {
	n := int(min(r.run, uint64(batchEvents-len(b.events))))
	start := len(b.events)
	if cap(b.events)-start < n {
		// A batch holds batchEvents at most: room for them all at once,
		// for grown run by run its events were copied a dozen times
		// into memory fresh to the kernel.
		b.events = slices.Grow(b.events[:start], batchEvents-start)
	}
	b.events = b.events[:start+n]
	b.runs = append(b.runs, runSegment{at: start, first: r.runLen - r.run + 1, ops: r.cols.c[streamOps].i,
		runAt: r.runAt, runLen: r.runLen, recordsAfter: r.d.i})
	for at := start; at < start+n; {
		chunk := b.events[at:min(at+chunkEvents, start+n)]
		if len(chunk) >= minChunkEvents {
			r.cols.sync()
		}
		if len(chunk) < minChunkEvents || !r.decodeChunk(b, chunk) {
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
// Fewer than minChunkEvents are decoded one by one: a pass over each
// column costs more than that saves, as where every event has a time of
// its own and the runs are of one event.
const (
	chunkEvents    = 256
	minChunkEvents = 32
)

// decodeChunk decodes the next len(events) events of the current run into
// events, but for their addresses and handles, and passes on the values
// of their address columns in b. If it finds damage, it leaves r, b and
// the streams as they were, and returns false.
func (r *blockDecoder) decodeChunk(b *batch, events []Event) bool {
	saved, prevStack, prevRaw := r.cols.positions(), r.prevStack, r.prevRaw
	refCodes, addrCodes, raws := len(b.refCodes), len(b.addrCodes), len(b.raws)
	refs, addrs, ok := r.chunkOps(events)
	if ok && r.chunkStacks(events) && r.chunkSizes(events) && r.chunkAddrValues(b, refs, addrs) && r.chunkStackUse(events) {
		return true
	}
	r.cols.setPositions(saved)
	r.prevStack, r.prevRaw = prevStack, prevRaw
	b.refCodes, b.addrCodes, b.raws = b.refCodes[:refCodes], b.addrCodes[:addrCodes], b.raws[:raws]
	return false
}

// The passes of decodeChunk over a chunk's events, a column each, follow.
// Each has a loop of its own for the short values, nearly all of them,
// with no call in it so that the compiler keeps all it needs in
// registers, and reads the other values, if any, between runs of that
// loop. That loop first takes values of one byte in a loop of their own,
// up to the first value with a tail: a run of them, as where a program
// repeats its calls, then costs a few instructions a value and a branch
// always taken the same way. The rest of the chunk has no branch on
// whether a value has a tail, which is as random as sizes and handles
// are: a chunk where values mix pays one mispredicted branch more.

// chunkOps decodes the op bytes of events, and returns how many of them
// release a block and how many allocate one: how many values of the
// reference and address columns they read, but for depths.
func (r *blockDecoder) chunkOps(events []Event) (refs, addrs int, ok bool) {
	ops := &r.cols.c[streamOps]
	// The Events record checked that the ops stream holds a byte for
	// every event of the run.
	opBytes := ops.p[ops.i : ops.i+len(events)]
	// The kinds are counted and checked eight op bytes at a time, by the
	// bits of their kind in each byte: opFree and opRealloc have bit 1
	// of the kind set, opAlloc and opRealloc bit 0, and a byte with
	// neither, or with bit 2, has no event kind.
	const ones = 0x0101010101010101
	var bad uint64
	k := 0
	for ; k+8 <= len(opBytes); k += 8 {
		w := binary.LittleEndian.Uint64(opBytes[k:])
		refs += bits.OnesCount64(w & (ones << (opShift + 1)))
		addrs += bits.OnesCount64(w & (ones << opShift))
		bad |= w&(ones<<(opShift+2)) | ^(w|w>>1)&(ones<<opShift)
	}
	for _, op := range opBytes[k:] {
		kind := op >> opShift
		refs += int(kind >> 1)
		addrs += int(kind & 1)
		if kind == 0 || kind > opRealloc {
			bad = 1
		}
	}
	if bad != 0 {
		return 0, 0, false // an op byte has no event kind
	}
	block, process, thread, time := r.block, r.process, r.thread, r.eventTime
	for i, op := range opBytes {
		e := &events[i]
		// Every field is set once, on its own: e held another event
		// before, and a struct literal is built on the stack and copied,
		// which costs more than decoding most events.
		e.Kind, e.API, e.Block = KindContext+Kind(op>>opShift), API(op&apiMask), block
		e.Process, e.Thread, e.Time = process, thread, time
	}
	ops.i += len(events)
	return refs, addrs, true
}

// chunkStacks decodes the stack IDs of events.
func (r *blockDecoder) chunkStacks(events []Event) bool {
	p, tails, i, j := r.cols.columnAt(streamStack)
	prev := r.prevStack
	for k := 0; k < len(events); k++ {
		var n int
		n, i, j, prev = shortStacks(events[k:], p, tails, i, j, prev)
		if k += n; k == len(events) {
			break
		}
		v, ni, nj, ok := longVarint(p, tails, i, j)
		if !ok {
			return false
		}
		i, j = ni, nj
		prev += unzigzag(v)
		events[k].Stack = prev
	}
	r.cols.setColumnAt(streamStack, i, j)
	r.prevStack = prev
	return true
}

// shortStacks decodes the stack IDs of events, after prev, from the stack
// column at p[i] and its tails at tails[j], up to the first value that is
// not short. It returns how many it decoded, the positions after them and
// the last stack ID.
func shortStacks(events []Event, p, tails []byte, i, j int, prev uint64) (int, int, int, uint64) {
	k := 0
	// Values of one byte first.
	for ; k < len(events) && i < len(p) && p[i] < 0x80; k, i = k+1, i+1 {
		prev += unzigzag(uint64(p[i]))
		events[k].Stack = prev
	}
	for ; k < len(events); k++ {
		v, ni, nj, ok := shortVarint(p, tails, i, j)
		if !ok {
			return k, i, j, prev
		}
		i, j = ni, nj
		prev += unzigzag(v)
		events[k].Stack = prev
	}
	return len(events), i, j, prev
}

// chunkStackUse decodes the stack in use of events, whose stacks are
// decoded. It reads the codes first, and changes the predictor only once
// they all read: decodeChunk cannot take that change back.
func (r *blockDecoder) chunkStackUse(events []Event) bool {
	if !r.cols.hasStackUse() {
		for k := range events {
			events[k].StackInUse = 0
		}
		return true
	}
	p, tails, i, j := r.cols.columnAt(streamStackUse)
	pr := &r.stackUse
	if i+len(events) <= len(p) && allZero(p[i:i+len(events)]) {
		// Code 0 for every event, with no tails, as where the stack in use
		// repeats: each event uses what was predicted.
		r.cols.setColumnAt(streamStackUse, i+len(events), j)
		pr.predictedUses(events, r.process)
		return true
	}
	for k := 0; k < len(events); k++ {
		v, ni, nj, ok := shortVarint(p, tails, i, j)
		if !ok {
			if v, ni, nj, ok = longVarint(p, tails, i, j); !ok {
				return false
			}
		}
		i, j = ni, nj
		events[k].StackInUse = v // the code, for now
	}
	r.cols.setColumnAt(streamStackUse, i, j)
	for k := range events {
		e := &events[k]
		e.StackInUse = stackUseOf(e.StackInUse, pr.predict(e.Process, e.Stack))
		pr.update(e.Process, e.Stack, e.StackInUse)
	}
	return true
}

// allZero reports whether every byte of p is 0, eight at a time.
func allZero(p []byte) bool {
	var or uint64
	for len(p) >= 8 {
		or |= binary.LittleEndian.Uint64(p)
		p = p[8:]
	}
	for _, b := range p {
		or |= uint64(b)
	}
	return or == 0
}

// chunkSizes decodes the sizes of events.
func (r *blockDecoder) chunkSizes(events []Event) bool {
	p, tails, i, j := r.cols.columnAt(streamSize)
	for k := 0; k < len(events); k++ {
		var n int
		n, i, j = shortSizes(events[k:], p, tails, i, j)
		if k += n; k == len(events) {
			break
		}
		size, ni, nj, ok := longVarint(p, tails, i, j)
		if !ok {
			return false
		}
		i, j = ni, nj
		events[k].Size = size
	}
	r.cols.setColumnAt(streamSize, i, j)
	return true
}

// shortSizes decodes the sizes of events from the size column at p[i]
// and its tails at tails[j] as shortStacks decodes stack IDs: frees have
// none, and a size of 0.
func shortSizes(events []Event, p, tails []byte, i, j int) (int, int, int) {
	k := 0
	for ; k < len(events); k++ { // values of one byte first
		e := &events[k]
		var size uint64
		if e.Kind != KindFree {
			if i >= len(p) || p[i] >= 0x80 {
				break
			}
			size, i = uint64(p[i]), i+1
		}
		e.Size = size
	}
	for ; k < len(events); k++ {
		e := &events[k]
		var size uint64
		if e.Kind != KindFree {
			v, ni, nj, ok := shortVarint(p, tails, i, j)
			if !ok {
				return k, i, j
			}
			size, i, j = v, ni, nj
		}
		e.Size = size
	}
	return len(events), i, j
}

// chunkAddrValues decodes into b the values of the address columns that
// events of a chunk read: the reference codes of the refs that release a
// block, the address codes of the addrs that allocate one, and the raw
// addresses that both escape to.
func (r *blockDecoder) chunkAddrValues(b *batch, refs, addrs int) bool {
	var escapes, more int
	var ok bool
	if b.refCodes, escapes, ok = r.chunkCodes(b.refCodes, refs, streamRef); !ok {
		return false
	}
	if b.addrCodes, more, ok = r.chunkCodes(b.addrCodes, addrs, streamAddr); !ok {
		return false
	}
	p, tails, i, j := r.cols.columnAt(streamRawAddr)
	prev := r.prevRaw
	for range escapes + more {
		// Steps between the addresses a program frees one after the
		// other are mostly short.
		v, ni, nj, ok := shortVarint(p, tails, i, j)
		if !ok {
			if v, ni, nj, ok = longVarint(p, tails, i, j); !ok {
				return false
			}
		}
		i, j = ni, nj
		prev += unzigzag(v)
		b.raws = append(b.raws, prev)
	}
	r.cols.setColumnAt(streamRawAddr, i, j)
	r.prevRaw = prev
	return true
}

// chunkCodes appends to codes count codes of column k, streamRef or
// streamAddr, and after each addrSource of streamAddr its depth. It
// returns them and how many of them are escapes (code 0) to the raw
// stream; or, if it finds damage, codes and false.
func (r *blockDecoder) chunkCodes(codes []uint64, count int, k int) ([]uint64, int, bool) {
	p, tails, i, j := r.cols.columnAt(k)
	first := len(codes)
	// The loop of short codes stops at an addrSource of the address
	// column, whose depth may be longer; a short code is never stop in the
	// reference column.
	stop := uint64(addrSource)
	if k == streamRef {
		stop = 1 << 63
	}
	escapes := 0
	for count > 0 {
		var n, zeros int
		start := len(codes)
		codes = slices.Grow(codes, count) // a depth takes more room
		n, i, j, zeros = shortCodes(codes[start:start+count], stop, p, tails, i, j)
		codes, count, escapes = codes[:start+n], count-n, escapes+zeros
		if count == 0 {
			break
		}
		code, ni, nj, ok := longVarint(p, tails, i, j)
		if !ok {
			return codes[:first], 0, false
		}
		codes = append(codes, code)
		count--
		switch {
		case k == streamAddr && code == addrSource:
			var depth uint64
			if depth, ni, nj, ok = longVarint(p, tails, ni, nj); !ok {
				return codes[:first], 0, false
			}
			codes = append(codes, depth)
		case code == 0:
			escapes++
		}
		i, j = ni, nj
	}
	r.cols.setColumnAt(k, i, j)
	return codes, escapes, true
}

// shortCodes decodes into codes the next codes of a column from p[i] and
// its tails from tails[j], up to the first that takes more than three
// bytes or is stop. It returns how many it decoded, the positions after
// them, and how many of them are 0: escapes to the raw stream, counted
// here while the codes are in registers.
func shortCodes(codes []uint64, stop uint64, p, tails []byte, i, j int) (n, ni, nj, zeros int) {
	// Values of one byte first: stop, an addrSource, is one too.
	for ; n < len(codes) && i < len(p) && p[i] < 0x80 && uint64(p[i]) != stop; n, i = n+1, i+1 {
		code := p[i]
		codes[n] = uint64(code)
		if code == 0 {
			zeros++
		}
	}
	for ; n < len(codes); n++ {
		if i >= len(p) {
			return n, i, j, zeros
		}
		low, tail := uint64(p[i]), uint64(0x80) // a tail too long, if there is none
		if j < len(tails) {
			tail = uint64(tails[j])
		}
		long := low >> 7 // 1 if the value has a tail, which is tail if long is 1
		v, tailLen := low&0x7f|tail<<7&-long, int(long)
		if tail>>7&long != 0 {
			// A tail of two bytes, as the steps from fresh memory often
			// have, or else a value for the caller.
			if j+1 >= len(tails) || tails[j+1] >= 0x80 {
				return n, i, j, zeros
			}
			v, tailLen = low&0x7f|(tail&0x7f)<<7|uint64(tails[j+1])<<14, 2
		}
		if v == stop {
			return n, i, j, zeros
		}
		if v == 0 {
			zeros++
		}
		codes[n] = v
		i, j = i+1, j+tailLen
	}
	return len(codes), i, j, zeros
}

// event decodes the next event of the current run into e, but for its
// addresses and handles, which the addressDecoder sets from the values of
// the address columns that event passes on in r.out. If the
// event is damaged, it notes why in r.why and returns false. It is
// decodeChunk one event at a time, for short chunks and where that found
// damage.
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
		size, ok := c.decoded(streamSize).take()
		if !ok {
			size = c.decodeAhead(streamSize)
		}
		e.Size = size
		r.addrValues()
	case opFree:
		e.Kind = KindFree
		e.Size = 0
		r.refValues()
	case opRealloc:
		e.Kind = KindRealloc
		r.refValues()
		e.Size = c.value(streamSize)
		r.addrValues()
	default:
		r.why = fmt.Sprintf("op byte 0x%02x has no event kind", op)
		return false
	}
	stack, ok := c.decoded(streamStack).take()
	if !ok {
		stack = c.decodeAhead(streamStack)
	}
	if c.bad || r.why != "" {
		if c.bad {
			r.why = c.overrun()
		}
		return false
	}
	r.prevStack += unzigzag(stack)
	e.Stack = r.prevStack
	e.StackInUse = 0
	if c.hasStackUse() {
		code := c.value(streamStackUse)
		if c.bad {
			r.why = c.overrun()
			return false
		}
		e.StackInUse = stackUseOf(code, r.stackUse.predict(e.Process, e.Stack))
		r.stackUse.update(e.Process, e.Stack, e.StackInUse)
	}
	return true
}

// addrValues passes on the values of the address of a new block: its
// code and what the code says follows it.
func (r *blockDecoder) addrValues() {
	b := r.out
	code, ok := r.cols.decoded(streamAddr).take()
	if !ok {
		code = r.cols.decodeAhead(streamAddr)
	}
	b.addrCodes = append(b.addrCodes, code)
	switch code {
	case addrEscape:
		b.raws = append(b.raws, r.rawAddr())
	case addrSource:
		b.addrCodes = append(b.addrCodes, r.cols.value(streamAddr))
	}
}

// refValues passes on the values of the address of a block being
// released.
func (r *blockDecoder) refValues() {
	b := r.out
	code, ok := r.cols.decoded(streamRef).take()
	if !ok {
		code = r.cols.decodeAhead(streamRef)
	}
	b.refCodes = append(b.refCodes, code)
	if code == refEscape {
		b.raws = append(b.raws, r.rawAddr())
	}
}

// rawAddr reads the next address of the raw stream.
func (r *blockDecoder) rawAddr() uint64 {
	r.prevRaw += unzigzag(r.cols.value(streamRawAddr))
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
