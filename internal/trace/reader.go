package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
)

// Reader reads a trace file record by record, or run of events by run of
// events (NextBatch). Goroutines in the background read, check and
// decompress the blocks ahead of it and decode their events, several
// blocks at once on as many cores (see readAhead); the Reader hands out
// what they decoded in the order of the file.
//
// Damage is reported, never fatal: Next returns a *DamageError for a
// damaged or truncated part of the file, and the call after that goes on
// with the next readable block. A Reader is not safe for concurrent use.
type Reader struct {
	ahead *readAhead
	job   *blockJob // the block being read, if any
	cur   *batch    // the batch of it being read, if any
	event int       // the index in cur.events of the next event
	other int       // and in cur.others of the next record or damage

	unit uint64 // Info.TimeUnit as of cur; 1 until Info is read
	// blockAt is the position before the block being read; fresh says
	// that nothing of it has been returned yet, and atBlock that what
	// NextBatch returned last was its first (see BlockStart).
	blockAt            Position
	fresh, atBlock     bool
	sawEnd             bool
	lastDamaged        bool // the last block read was damaged: End may have been in it
	incompleteReported bool
	err                error // the underlying reader failed
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
	if v := binary.LittleEndian.Uint16(header[8:]); v < minVersion || v > Version {
		return nil, &VersionError{Version: v}
	}
	return newReader(&source{r: r, offset: fileHeaderSize}, Position{Unit: 1}), nil
}

func newReader(src *source, at Position) *Reader {
	tr := &Reader{ahead: newReadAhead(src, at.Blocks, at.Unit), unit: at.Unit}
	// A Reader dropped before the end of its trace leaves no goroutine
	// behind.
	runtime.AddCleanup(tr, (*readAhead).stop, tr.ahead)
	return tr
}

// Position is a place between two blocks of a trace where reading can
// start again (NewReaderAt): the file offset of the block after it, the
// number of sound blocks before that one, and the time unit in force
// there.
type Position struct {
	Offset int64
	Blocks uint32
	Unit   uint64
}

// NewReaderAt returns a Reader of the trace r from a position that
// BlockStart gave: r must be at its offset. It returns what a Reader from
// the start returns after that position, but for the records before it
// that the caller has taken in already (the Info, say).
func NewReaderAt(r io.Reader, at Position) *Reader {
	return newReader(&source{r: r, offset: at.Offset}, at)
}

// BlockStart reports whether what NextBatch returned last is the first
// thing of a sound block with no damage before it, and the position
// right before that block. (It is false after Next.)
func (r *Reader) BlockStart() (Position, bool) { return r.blockAt, r.atBlock }

// Next returns the next record. It returns io.EOF after the End record, and
// ErrIncomplete (once, then io.EOF) if the file ends without one. A
// *DamageError is not fatal: call Next again to go on after the damage.
//
// Event records allocate nothing. The pointers in other records are new for
// each record; the caller may keep them.
func (r *Reader) Next() (Record, error) {
	// What Next returns is no block's start, and takes its block's.
	r.atBlock = false
	for !r.sawEnd {
		if b := r.cur; b != nil {
			if r.other < len(b.others) || r.event < len(b.events) {
				r.fresh = false
			}
			if r.other < len(b.others) && b.others[r.other].at == r.event {
				return r.nextOther()
			}
			if r.event < len(b.events) {
				e := &b.events[r.event]
				r.event++
				return Record{Kind: e.Kind, Event: *e}, nil
			}
		}
		if err := r.nextBatch(); err != nil {
			return Record{}, err
		}
	}
	return Record{}, io.EOF
}

// NextBatch returns the next run of events, or else what Next returns:
// events nearly always come in runs of thousands, and a loop over them
// costs much less than a call of Next for each.
//
// If the next record is an event, NextBatch returns it and the events that
// follow it up to the next record that is not an event or a limit of a few
// thousand, with a zero rec and a nil error. The events are in memory of
// the Reader's, which they stay valid in until the next call of Next or
// NextBatch. Otherwise it returns no events, and the record and error
// that Next would return. Calls of Next and NextBatch may be mixed.
func (r *Reader) NextBatch() (events []Event, rec Record, err error) {
	r.atBlock = false
	for !r.sawEnd {
		if b := r.cur; b != nil {
			end := len(b.events)
			if r.other < len(b.others) {
				end = b.others[r.other].at
			}
			if r.event < end {
				events, r.event = b.events[r.event:end], end
				r.atBlock, r.fresh = r.fresh, false
				return events, Record{}, nil
			}
			if r.other < len(b.others) {
				rec, err = r.nextOther()
				r.atBlock, r.fresh = r.fresh && err == nil, false
				return nil, rec, err
			}
		}
		if err := r.nextBatch(); err != nil {
			return nil, Record{}, err
		}
	}
	return nil, Record{}, io.EOF
}

// nextOther returns the next record or damage of the current batch.
func (r *Reader) nextOther() (Record, error) {
	o := &r.cur.others[r.other]
	r.other++
	switch {
	case o.err != nil:
		r.lastDamaged = true // errors of a block are its damage
		return Record{}, o.err
	case o.rec.Kind == KindEnd:
		r.sawEnd = true
		r.ahead.stop()
	}
	return o.rec, nil
}

// nextBatch moves on to the next batch of the block being read, or of the
// next block.
func (r *Reader) nextBatch() error {
	if r.cur != nil {
		putBatch(r.cur)
		r.cur = nil
	}
	for {
		if r.job != nil {
			if b, ok := <-r.job.batches; ok {
				r.take(b)
				return nil
			}
			r.ahead.doneWith(r.job)
			r.job = nil
		}
		job, ok := <-r.ahead.blocks
		if !ok {
			return r.endOfFile()
		}
		if err := r.startBlock(job); err != nil {
			return err
		}
	}
}

// take makes b the current batch. Events decoded before the time unit was
// known get their times corrected if the unit they were decoded with was
// not the unit of the latest Info before them.
func (r *Reader) take(b *batch) {
	if b.inherited > 0 && b.assumedUnit != r.unit {
		b.setUnit(r.unit)
	}
	if b.unitSet != 0 {
		r.unit = b.unitSet
	}
	r.cur, r.event, r.other = b, 0, 0
}

// startBlock starts reading a block read ahead, or returns the damage or
// the error met instead.
func (r *Reader) startBlock(job *blockJob) error {
	if !job.found {
		r.ahead.doneWith(job)
	}
	switch {
	case job.err != nil:
		r.err = fmt.Errorf("reading trace: %w", job.err)
		return r.err
	case job.damage != nil:
		r.lastDamaged = true
		return job.damage
	case job.found:
		r.lastDamaged = false
		r.job = job
		r.blockAt, r.fresh = Position{Offset: job.offset, Blocks: job.sound - 1, Unit: r.unit}, true
	}
	return nil
}

// endOfFile returns what Next returns once there are no more blocks. A
// trace that ends without End is incomplete only if it ends cleanly: after
// damage, End may have been in what was lost, and the damage has been
// reported.
func (r *Reader) endOfFile() error {
	r.ahead.stop()
	switch {
	case r.err != nil:
		return r.err
	case r.sawEnd || r.lastDamaged || r.incompleteReported:
		return io.EOF
	}
	r.incompleteReported = true
	return ErrIncomplete
}

// other decodes a record that is not an event or one that control decodes.
func (r *blockDecoder) other(k Kind) Record {
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
	case KindThreadStack:
		rec.ThreadStack = &ThreadStack{Process: d.uv(), Index: d.uv(), Time: d.uv(), HighWater: d.uv(), Size: d.uv()}
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
	case KindStackCalls:
		rec.StackCalls = readStackCalls(d)
	case KindDeepestStack:
		rec.DeepestStack = readDeepestStack(d)
	case KindLeakScan:
		rec.LeakScan = readLeakScan(d)
	case KindLeakBlocks:
		rec.LeakBlocks = readLeakBlocks(d)
	case KindLeakOrigins:
		rec.LeakOrigins = readLeakOrigins(d)
	case KindWarning:
		body := d.body()
		rec.Warning = &Warning{Process: body.uv(), Message: body.str()}
		d.bodyRead(&body)
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

func (r *blockDecoder) info() *Info {
	d := &r.d
	i := &Info{StartUnixNano: d.sv(), TimeUnit: d.uv(), Hostname: d.str(), Recorder: d.str(),
		MaxFrames: d.uv(), Command: d.strs()}
	if i.TimeUnit == 0 {
		d.fail("time unit is 0")
		return i
	}
	r.setUnit(i.TimeUnit)
	return i
}

func (r *blockDecoder) module() *Module {
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
	d.bodyRead(&body)
	return t
}

// readStackCalls decodes a StackCalls record; bytes of its body after its
// fields are skipped, as Type's.
func readStackCalls(d *decoder) *StackCalls {
	body := d.body()
	c := &StackCalls{Process: body.uv(), Thread: body.uv(), Time: body.uv(), Max: body.uv(), Level: body.uv(), Calls: body.uv()}
	d.bodyRead(&body)
	return c
}

// readDeepestStack decodes a DeepestStack record.
func readDeepestStack(d *decoder) *DeepestStack {
	body := d.body()
	s := &DeepestStack{Process: body.uv(), Thread: body.uv(), Time: body.uv(), Bytes: body.uv(), Stack: body.uv()}
	if n := body.count(1); n > 0 {
		s.FrameSizes = make([]uint64, n)
		for i := range s.FrameSizes {
			s.FrameSizes[i] = body.uv()
		}
	}
	d.bodyRead(&body)
	return s
}

// readLeakScan decodes a LeakScan record; bytes of its body after its
// fields are skipped.
func readLeakScan(d *decoder) *LeakScan {
	body := d.body()
	l := &LeakScan{Process: body.uv(), Time: body.uv(), Duration: body.uv(), Error: body.str()}
	for _, f := range []*uint64{&l.DefinitelyLostBytes, &l.DefinitelyLostBlocks, &l.IndirectlyLostBytes,
		&l.IndirectlyLostBlocks, &l.PossiblyLostBytes, &l.PossiblyLostBlocks, &l.StillReachableBytes,
		&l.StillReachableBlocks} {
		*f = body.uv()
	}
	d.bodyRead(&body)
	return l
}

// readLeakBlocks decodes a LeakBlocks record. A class that is not a lost
// one, or addresses out of order, are damage.
func readLeakBlocks(d *decoder) *LeakBlocks {
	body := d.body()
	l := &LeakBlocks{Process: body.uv()}
	n := body.count(2)
	if n > 0 {
		l.Blocks = make([]LeakBlock, 0, n)
	}
	prev := uint64(0)
	for i := 0; i < n && body.bad == ""; i++ {
		addr, ok := d.nextAddr(&body, i, prev)
		if !ok {
			return l
		}
		b := LeakBlock{Addr: addr, Class: LeakClass(body.uv())}
		switch {
		case b.Class == IndirectlyLost:
			b.Leader = b.Addr + uint64(body.sv())
		case b.Class != DefinitelyLost && b.Class != PossiblyLost:
			d.fail(fmt.Sprintf("block %d at 0x%x has class %d, not a lost one", i, b.Addr, uint8(b.Class)))
			return l
		}
		prev = b.Addr
		l.Blocks = append(l.Blocks, b)
	}
	d.bodyRead(&body)
	return l
}

// readLeakOrigins decodes a LeakOrigins record. Addresses out of order
// are damage.
func readLeakOrigins(d *decoder) *LeakOrigins {
	body := d.body()
	l := &LeakOrigins{Process: body.uv()}
	n := body.count(5)
	if n > 0 {
		l.Origins = make([]LeakOrigin, 0, n)
	}
	prev := uint64(0)
	for i := 0; i < n && body.bad == ""; i++ {
		addr, ok := d.nextAddr(&body, i, prev)
		if !ok {
			return l
		}
		o := LeakOrigin{Addr: addr}
		o.Parent = o.Addr + uint64(body.sv())
		o.Time, o.Thread, o.Stack = body.uv(), body.uv(), body.uv()
		prev = o.Addr
		l.Origins = append(l.Origins, o)
	}
	d.bodyRead(&body)
	return l
}

// skip skips a record of a kind this reader does not know, if its kind says
// it may be skipped.
func (r *blockDecoder) skip(k Kind) {
	d := &r.d
	if k < KindFirstSkippable || k > kindLastSkippable {
		d.fail("unknown record kind")
		return
	}
	d.body()
}
