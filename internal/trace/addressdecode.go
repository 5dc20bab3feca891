package trace

import "fmt"

// addressDecoder decodes the addresses of the events of a block, and gives
// them their handles: the part of decoding that keeps the heap state of
// the predictors (docs/format.md, rules R and A). It runs on a goroutine
// of its own, behind the blockDecoder that decodes the rest of the block
// and passes on the values of the address columns (batch.refCodes,
// addrCodes and raws): split in two, the decoding of a block keeps two
// cores busy.
type addressDecoder struct {
	streams streamSet // the block's streams, to say how much damage skips
	offset  int64     // file offset of the block
	heaps   heapStates
	// The address values of the batch being decoded (see batch), and
	// the index of the next of each.
	refs, addrs, raws          []uint64
	nextRef, nextAddr, nextRaw int
	why                        string // why the event being decoded is damaged
}

func newAddressDecoder(f *fetched) *addressDecoder {
	return &addressDecoder{streams: f.streams, offset: f.offset}
}

// refCode, addrCode and raw return the next reference code, address code
// or value, and raw address of the batch.
func (a *addressDecoder) refCode() uint64 {
	v := a.refs[a.nextRef]
	a.nextRef++
	return v
}

func (a *addressDecoder) addrCode() uint64 {
	v := a.addrs[a.nextAddr]
	a.nextAddr++
	return v
}

func (a *addressDecoder) raw() uint64 {
	v := a.raws[a.nextRaw]
	a.nextRaw++
	return v
}

// decode sets the addresses and handles of the events of b, the next
// batch of the block. If an event is damaged, it cuts b short before it,
// with the damage, and returns false: the rest of the block is skipped.
func (a *addressDecoder) decode(b *batch) bool {
	a.refs, a.addrs, a.raws = b.refCodes, b.addrCodes, b.raws
	a.nextRef, a.nextAddr, a.nextRaw = 0, 0, 0
	for s, run := range b.runs {
		end := len(b.events)
		if s+1 < len(b.runs) {
			end = b.runs[s+1].at
		}
		if run.at == end {
			continue
		}
		// The events of a run share their process and thread, so their
		// states are looked up once.
		h := a.heaps.get(b.events[run.at].Process)
		ti := h.thread(b.events[run.at].Thread)
		events := b.events[run.at:end]
		for i := 0; i < len(events); i++ {
			e := &events[i]
			switch e.Kind {
			case KindAlloc:
				// A run of them, not one alone: the loop costs more
				// to start than addr.
				if code := a.addrs[a.nextAddr]; code >= addrStep && code&1 == 0 &&
					i+1 < len(events) && events[i+1].Kind == KindAlloc {
					if n := a.freshAllocs(h, ti, events[i:]); n > 0 {
						i += n - 1
						continue
					}
				}
				e.Addr, e.Handle = a.addr(h, ti, e.Size)
				e.OldAddr, e.OldHandle = 0, 0
			case KindFree:
				e.Addr, e.Handle = a.ref(h, ti)
				e.OldAddr, e.OldHandle = 0, 0
			case KindRealloc:
				e.OldAddr, e.OldHandle = a.ref(h, ti)
				e.Addr, e.Handle = a.addr(h, ti, e.Size)
			}
			if a.why != "" {
				a.cut(b, &run, run.at+i)
				return false
			}
		}
	}
	return true
}

// addr decodes the address of a new block of size bytes that thread ti
// allocates, and gives the block its handle.
func (a *addressDecoder) addr(h *heapState, ti uint32, size uint64) (uint64, uint32) {
	var addr uint64
	c := sizeClass(size)
	t := &h.threads[ti]
	var ok bool
	switch code := a.addrCode(); {
	case code == addrEscape:
		addr = a.raw()
		t.fresh(addr, size)
	case code == addrLastFreed:
		addr = h.lastFreed
	case code == addrSource:
		d := a.addrCode()
		if addr, ok = h.takeAt(t.source, c, d); !ok {
			a.fail(fmt.Sprintf("address code %d, depth %d for size %d: %s", code, d, size, missing(&h.threads[t.source], c)))
			return 0, 0
		}
	case code&1 == 1:
		d := (code - addrDepth) / 2
		if addr, ok = h.takeAt(ti, c, d); !ok {
			a.fail(fmt.Sprintf("address code %d for size %d: %s", code, size, missing(t, c)))
			return 0, 0
		}
	default:
		addr = t.next + stepOf((code-addrStep)/2)
		t.fresh(addr, size)
	}
	return addr, h.allocate(ti, addr, c)
}

// freshAllocs decodes the allocations at the start of events that are
// coded as steps from fresh memory, as addr and allocate would, up to the
// first other event or the first allocation for which allocate would
// make room, and returns how many it decoded. Allocators carve most
// blocks of a growing heap one after the other: a loop over them alone
// keeps the state it moves in registers.
func (a *addressDecoder) freshAllocs(h *heapState, ti uint32, events []Event) int {
	t := &h.threads[ti]
	codes := a.addrs[a.nextAddr:]
	n := min(len(events), len(codes), h.allocateRoom(t))
	events, codes = events[:n], codes[:n]
	serial, at, next := h.serial, h.recentAt, t.next
	k := 0
	for ; k < len(events); k++ {
		e := &events[k]
		code := codes[k]
		if e.Kind != KindAlloc || code < addrStep || code&1 != 0 {
			break
		}
		addr := next + stepOf((code-addrStep)/2)
		next = addr + chunkSize(e.Size)
		serial++
		num := h.number(handle{addr: addr, thread: ti, class: sizeClass(e.Size)}, serial)
		at = (at + 1) % recentDepth
		h.recent[at] = num
		q := len(t.queue)
		t.queue = t.queue[:q+1]
		t.queue[q] = queued{num: num, serial: serial}
		e.Addr, e.Handle, e.OldAddr, e.OldHandle = addr, num, 0, 0
	}
	h.serial, h.recentAt, t.next = serial, at, next
	a.nextAddr += k
	return k
}

// missing says why a class list has no address at the depth a code names.
func missing(t *threadState, c uint8) string {
	switch {
	case c == 0:
		return "a size with no class list"
	case t.list(c) == nil:
		return "its class list is empty"
	}
	return "deeper than its class list"
}

// ref decodes the address of a block that thread ti releases, and returns
// it with the block's handle, 0 if it has none.
func (a *addressDecoder) ref(h *heapState, ti uint32) (uint64, uint32) {
	code := a.refCode()
	if code == refEscape {
		addr := a.raw()
		h.lastFreed = addr
		return addr, 0
	}
	num := h.handleOf(&h.threads[ti], code)
	if !h.live(num) {
		a.fail(fmt.Sprintf("handle %d is not live (reference code %d)", num, code))
		return 0, 0
	}
	addr := h.handles[num].addr
	h.release(ti, uint32(num))
	return addr, uint32(num)
}

// fail notes why the event being decoded is damaged, unless that is known
// already.
func (a *addressDecoder) fail(why string) {
	if a.why == "" {
		a.why = why
	}
}

// cut cuts b short before its event i, which is damaged and in run, and
// reports the damage there, as the blockDecoder reports the damage it
// finds: what b held after the event is skipped, with the rest of the
// block.
func (a *addressDecoder) cut(b *batch, run *runSegment, i int) {
	b.events = b.events[:i]
	kept := 0
	b.unitSet = 0
	for _, o := range b.others {
		if o.at > i { // after the event in the records stream
			break
		}
		if o.unit != 0 {
			b.unitSet = o.unit
		}
		kept++
	}
	clear(b.others[kept:])
	b.others = append(b.others[:kept], placed{at: i, err: a.damage(run, i)})
	b.inherited = min(b.inherited, i)
	b.hasEnd = false
}

// damage returns the damage of event i of the batch, in run. To say
// exactly how much is skipped, it goes through the events of the block
// before it again: as many as the op bytes before it, each event having
// one.
func (a *addressDecoder) damage(run *runSegment, i int) error {
	var s eventStreams
	for k := range a.streams {
		s.c[k].p = a.streams[k]
	}
	for range run.ops + i - run.at {
		s.skipEvent()
	}
	n := run.first + uint64(i-run.at)
	return &DamageError{
		Offset:       a.offset,
		BytesSkipped: int64(len(a.streams[streamRecords])-run.recordsAfter) + int64(s.unread()),
		Reason:       fmt.Sprintf("events record at byte %d of the records stream: event %d of %d: %s", run.runAt, n, run.runLen, a.why),
	}
}
