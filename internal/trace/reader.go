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
	spare []byte       // payload buffer to decode the next block into

	d      decoder // the current block's payload
	offset int64   // file offset of the current block

	// Delta state of the current block.
	process, thread               uint64
	prevTime, prevAddr, prevStack uint64

	unit               uint64 // Info.TimeUnit; 1 until Info is read
	sawEnd             bool
	atEnd              bool // there are no more blocks
	tailDamaged        bool // damage reaching to the end of the file was reported
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
func (r *Reader) Next() (Record, error) {
	for !r.sawEnd {
		if r.d.i >= len(r.d.p) {
			if err := r.nextBlock(); err != nil {
				return Record{}, err
			}
			continue
		}
		// Events are nearly all records: decode them here, without the
		// detour through record, which is the slower general path.
		if k := Kind(r.d.p[r.d.i]); k.IsEvent() {
			if e, ok := r.event(k); ok {
				return Record{Kind: k, Event: e}, nil
			}
			return Record{}, r.damaged(r.d.i, k)
		}
		rec, err := r.record()
		if err != nil || rec.Kind != KindInvalid {
			return rec, err
		}
		// It was a context or skippable record: go on to the next.
	}
	return Record{}, io.EOF
}

// readAhead starts reading the next block in the background.
func (r *Reader) readAhead() {
	src, dst, ahead := r.src, r.spare, r.ahead
	r.spare = nil
	go func() { ahead <- src.next(dst) }()
}

// nextBlock moves on to the block read ahead, starts reading the one after
// it, and resets the delta state.
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
	if f.payload != nil {
		// The block just finished is done with: its buffer takes the next.
		r.spare = r.d.p[:0]
		r.d.p = f.payload
	} else {
		r.d.p = r.d.p[:0]
	}
	r.d.i, r.d.bad, r.offset = 0, "", f.offset
	r.process, r.thread = 0, 0
	r.prevTime, r.prevAddr, r.prevStack = 0, 0, 0
	r.atEnd = f.atEnd
	r.tailDamaged = f.atEnd && f.damage != nil
	if !r.atEnd {
		r.readAhead()
	}
	if f.damage != nil {
		return f.damage
	}
	return nil
}

func (r *Reader) endOfFile() error {
	switch {
	case r.err != nil:
		return r.err
	case r.sawEnd || r.tailDamaged || r.incompleteReported:
		return io.EOF
	}
	r.incompleteReported = true
	return ErrIncomplete
}

// record decodes the record at the current position that is not an event.
// It returns a record of KindInvalid for records that only change the
// reader's state or are skipped.
func (r *Reader) record() (Record, error) {
	d := &r.d
	start := d.i
	k := Kind(d.p[d.i])
	d.i++
	var rec Record
	if k == KindContext {
		r.process = d.uv()
		r.thread = d.uv()
	} else {
		rec = r.other(k)
	}
	if d.bad != "" {
		return Record{}, r.damaged(start, k)
	}
	return rec, nil
}

// event decodes the event of kind k at the current position. If it is
// damaged, it leaves the position on it and reports false; d.bad says why.
//
// This is the hot loop of every analysis, so it works on local copies of
// the payload and position, and checks for damage once, at the end.
func (r *Reader) event(k Kind) (Event, bool) {
	p, i := r.d.p, r.d.i+1
	var dt, api, addr, size, stack uint64
	dt, i = uvarint(p, i)
	api, i = byteAt(p, i)
	addr, i = uvarint(p, i)
	e := Event{Kind: k, Process: r.process, Thread: r.thread, API: API(api)}
	switch k {
	case KindAlloc:
		e.Addr = r.prevAddr + unzigzag(addr)
		size, i = uvarint(p, i)
	case KindFree:
		e.Addr = r.prevAddr + unzigzag(addr)
	case KindRealloc:
		e.OldAddr = r.prevAddr + unzigzag(addr)
		addr, i = uvarint(p, i)
		e.Addr = e.OldAddr + unzigzag(addr)
		size, i = uvarint(p, i)
	}
	stack, i = uvarint(p, i)
	if i > len(p) {
		r.d.bad = "runs past the end of the block or holds a varint of more than 64 bits"
		return Event{}, false
	}
	e.Size = size
	e.Stack = r.prevStack + unzigzag(stack)
	r.prevTime += dt
	e.Time = r.prevTime * r.unit
	r.prevAddr, r.prevStack = e.Addr, e.Stack
	r.d.i = i
	return e, true
}

// other decodes a record that is not an event or a context.
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
		rec.StackNode = &StackNode{Process: d.uv(), ID: d.uv(), Parent: d.uv(), Module: d.uv(), Offset: d.uv()}
	case KindString:
		rec.String = &String{ID: d.uv(), Value: d.str()}
	case KindSymbol:
		rec.Symbol = r.symbol()
	case KindObjectStatus:
		rec.ObjectStatus = &ObjectStatus{Object: d.uv(), Status: SymbolStatus(d.enum()), Message: d.str()}
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

func (r *Reader) symbol() *Symbol {
	d := &r.d
	s := &Symbol{Object: d.uv(), Offset: d.uv()}
	if n := d.count(3); n > 0 {
		s.Frames = make([]Frame, n)
		for i := range s.Frames {
			s.Frames[i] = Frame{Function: d.uv(), File: d.uv(), Line: d.uv()}
		}
	}
	return s
}

// skip skips a record of a kind this reader does not know, if its kind says
// it may be skipped.
func (r *Reader) skip(k Kind) {
	d := &r.d
	if k < KindFirstSkippable || k > kindLastSkippable {
		d.fail("unknown record kind")
		return
	}
	n := d.uv()
	if n > uint64(len(d.p)-d.i) {
		d.fail(fmt.Sprintf("length %d %s", n, errPastEnd))
		return
	}
	d.i += int(n)
}

// damaged reports the record at start of the current block as damaged. The
// rest of the block is skipped: without the record's length nothing after
// it can be found.
func (r *Reader) damaged(start int, k Kind) error {
	err := &DamageError{
		Offset:       r.offset,
		BytesSkipped: int64(len(r.d.p) - start),
		Reason:       fmt.Sprintf("%v record at byte %d of the block's payload: %s", k, start, r.d.bad),
	}
	r.d.i, r.d.bad = len(r.d.p), ""
	return err
}
