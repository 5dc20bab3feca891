package trace

import "math/bits"

// The predictors turn the addresses of events into small codes. Allocators
// hand out again the memory they were just given back, and a program frees
// mostly what it allocated recently, or in the order it allocated it, so
// within a block:
//
//   - a free (or the old address of a realloc) names a block allocated
//     earlier in the block: as the oldest live block of the thread whose
//     block its thread released last (threads that hand blocks to each
//     other through queues free them in the order they were allocated), by
//     its rank among the latest allocations, or by its handle;
//   - an alloc (or the new address of a realloc) is most often an address
//     released recently with its size class, found by its depth in the
//     class list of its thread; and fresh memory, which allocators carve
//     one block after the other, is most often right after the previous
//     fresh block of the thread, or a short step from there.
//
// The state below is kept per process, and in it per thread, and it starts
// afresh in every block, so that every block decodes alone. The Writer and
// the Reader update it with the same functions; docs/format.md gives the
// rules step by step.

// Class lists hold, per thread and size class, the addresses released
// lately of blocks that the thread allocated, whichever thread released
// them. They are per allocating thread because allocators keep memory per
// thread (glibc's arenas and tcaches): a block that another thread frees
// goes back to the heap it came from, and its allocating thread gets it
// again. On the cross-thread free benchmark, a list per process finds 20%
// of the addresses in its latest 64; per allocating thread, the same
// depth finds 56%.
//
// A list holds the addresses of the latest listSpan pushes onto it that
// have not been taken out again, and an address is coded by its depth:
// how many of those were pushed after it. glibc serves a size from more
// than its LIFO tcache (its fastbins, smallbins and unsorted chunks), so
// addresses come back from deep in the lists, but past a depth of a
// hundred or so a depth costs more than a step from fresh memory: the
// Writer does not code deeper ones (writerMaxDepth).
const (
	listSpan       = 1024
	listMinSlots   = 16
	numClasses     = 256
	maxStackedSize = 4072 // the largest size of a class below numClasses
)

// sizeClass returns the class of a block of size bytes, which is its glibc
// chunk size in units of 16 bytes: chunkSize(size) / 16. It returns 0 for
// sizes whose class has no list; real classes start at 2.
func sizeClass(size uint64) uint8 {
	if size > maxStackedSize {
		return 0
	}
	return uint8(max(2, (size+23)>>4))
}

// chunkSize returns the size of the chunk glibc carves for a block of size
// bytes: the size, 8 bytes of header, rounded up to 16, at least 32. (The
// arithmetic wraps for sizes near 2^64; it is only a predictor.)
func chunkSize(size uint64) uint64 {
	return max(32, (size+8+15)&^15)
}

// Address codes (streamAddr).
const (
	addrEscape    = 0 // the next value of the raw address stream
	addrLastFreed = 1 // the latest address released in the process
	// addrSource: the address at depth v in the class list of the source
	// thread (see threadState.source), where v is the next value of the
	// addr column. Threads that free each other's blocks often get them
	// back from their own caches.
	addrSource = 2
	// From addrDepth up, odd codes are depths and even codes are steps:
	// addrDepth + 2d is the address at depth d in the class list of the
	// thread, and addrStep + 2z is a step from next, the end of the
	// thread's previous fresh block, where z is a step value (stepValue).
	// Depths and steps are both most often small: interleaved, both have
	// short codes.
	addrDepth = 3
	addrStep  = 4
)

// maxOddStep bounds the steps that are not multiples of 16 that a step
// code can hold; the Writer escapes to the raw stream for longer ones.
const maxOddStep = 1 << 60

// stepValue returns the step value of a step of d bytes from next, and
// false if the step is too long for one. Steps that are multiples of 16
// are stored divided by 16, so they take four bits less: the value is
// zigzag(d/16) << 1 for those, zigzag(d) << 1 | 1 for the others. Both
// stay below 2^62, so addrStep + 2 × value fits in 64 bits.
func stepValue(d uint64) (uint64, bool) {
	if d&15 == 0 {
		return zigzag(int64(d)>>4) << 1, true
	}
	if int64(d) >= maxOddStep || int64(d) < -maxOddStep {
		return 0, false
	}
	return zigzag(int64(d))<<1 | 1, true
}

// stepOf returns the step a step value stands for.
func stepOf(v uint64) uint64 {
	if v&1 == 0 {
		return unzigzag(v>>1) << 4
	}
	return unzigzag(v >> 1)
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// Reference codes (streamRef).
const (
	refEscape = 0 // the next value of the raw address stream
	refOldest = 1 // the oldest live block of the source thread
	// refRecent and up to refHandle-1: the block allocated code-refRecent+1
	// allocations ago (1: the latest), still live.
	refRecent   = 2
	recentDepth = 16
	refHandle   = refRecent + recentDepth // and up: handle code-refHandle+1
)

// handle is a block allocated earlier in this block of the trace, by its
// handle number.
type handle struct {
	addr   uint64
	serial uint32 // the serial number of its allocation; 0 once released
	thread uint32 // the index of its allocating thread in heapState.threads
	class  uint8  // sizeClass of its size
}

// queued is an entry of a thread's queue: the allocation with serial
// number serial, which got handle num.
type queued struct{ num, serial uint32 }

// threadState is the predictor state of one thread of a process within a
// block.
type threadState struct {
	id uint64 // the thread's index in its process, as Context records give it
	// next is where the block after the thread's previous fresh one would
	// start: the address and chunk size of its latest allocation coded as
	// a step or an escape, added up.
	next uint64
	// source is the index of the thread whose block this thread released
	// last (itself until it releases one).
	source uint32
	// queue holds the thread's allocations in order; those released are
	// skipped lazily (head moves past them at the front, compaction drops
	// them elsewhere). live counts those not released.
	queue []queued
	head  int
	live  int
	// listOf gives the class list of each class: 1 + index in lists, 0
	// if there is none yet. Both are made when first needed, so that
	// a thread that frees little costs little: a damaged block can name
	// many threads.
	listOf *[numClasses]uint8
	lists  []classList
}

func (t *threadState) reset(id uint64, index uint32) {
	t.id, t.next, t.source = id, 0, index
	t.queue, t.head, t.live = t.queue[:0], 0, 0
	if t.listOf != nil {
		*t.listOf = [numClasses]uint8{}
	}
	for i := range t.lists {
		t.lists[i].reset()
	}
	t.lists = t.lists[:0]
}

// list returns the class list of class c, or nil if there is none.
func (t *threadState) list(c uint8) *classList {
	if t.listOf == nil || t.listOf[c] == 0 {
		return nil
	}
	return &t.lists[t.listOf[c]-1]
}

// makeList returns the class list of class c, making it if need be.
func (t *threadState) makeList(c uint8) *classList {
	if t.listOf == nil {
		t.listOf = new([numClasses]uint8)
	}
	if i := t.listOf[c]; i != 0 {
		return &t.lists[i-1]
	}
	if len(t.lists) < cap(t.lists) {
		t.lists = t.lists[:len(t.lists)+1] // reuse the memory of a reset list
	} else {
		t.lists = append(t.lists, classList{})
	}
	t.listOf[c] = uint8(len(t.lists))
	return &t.lists[len(t.lists)-1]
}

// fresh records that a block of size bytes at addr was coded as a step or
// an escape: it is fresh memory, and the thread's next fresh block is
// likely right after it.
func (t *threadState) fresh(addr, size uint64) {
	t.next = addr + chunkSize(size)
}

// classList is a list of released addresses: the addresses of its latest
// listSpan pushes that have not been taken out again. Push number p (from
// 0) goes to slot p mod len(addrs) of a ring, which grows to listSpan
// slots as pushes come; a bitmap says which slots still hold an address
// of the list. A push into a slot whose address is still there drops that
// address: it was pushed listSpan pushes ago.
type classList struct {
	addrs   []uint64 // a power of two of them, at most listSpan
	present []uint64 // bit i: addrs[i] is in the list
	pushes  uint32   // how many addresses were pushed
}

func (l *classList) reset() {
	clear(l.present)
	l.pushes = 0
}

// push adds addr at the top of the list and returns its slot, and the
// address that dropped out, if one did.
func (l *classList) push(addr uint64) (slot int, dropped uint64, didDrop bool) {
	p := int(l.pushes)
	if p == len(l.addrs) && p < listSpan {
		l.grow()
	}
	slot = p & (len(l.addrs) - 1)
	word, bit := slot>>6, uint64(1)<<(slot&63)
	if l.present[word]&bit != 0 {
		dropped, didDrop = l.addrs[slot], true
	}
	l.addrs[slot] = addr
	l.present[word] |= bit
	l.pushes++
	return slot, dropped, didDrop
}

// grow doubles the ring. It is full and has never wrapped around, so
// every push keeps its slot.
func (l *classList) grow() {
	n := max(listMinSlots, 2*len(l.addrs))
	if cap(l.addrs) >= n { // memory of an earlier block
		l.addrs = l.addrs[:n]
	} else {
		l.addrs = append(l.addrs[:cap(l.addrs)], make([]uint64, n-cap(l.addrs))...)
	}
	words := (n + 63) / 64
	if cap(l.present) >= words {
		l.present = l.present[:words]
	} else {
		l.present = append(l.present, make([]uint64, words-len(l.present))...)
	}
}

// top returns the slot of the latest push.
func (l *classList) top() int { return int(l.pushes-1) & (len(l.addrs) - 1) }

// depthOf returns the depth of the address in slot, which must be in the
// list: how many addresses of the list were pushed after it.
func (l *classList) depthOf(slot int) int {
	top := l.top()
	switch {
	case slot == top:
		return 0
	case slot < top:
		return l.count(slot+1, top)
	}
	return l.count(slot+1, len(l.addrs)-1) + l.count(0, top)
}

// count returns how many of the slots from lo to hi hold an address of the
// list.
func (l *classList) count(lo, hi int) int {
	n := 0
	for w := lo >> 6; w <= hi>>6; w++ {
		bitsOf := l.present[w]
		if w == lo>>6 {
			bitsOf &= ^uint64(0) << (lo & 63)
		}
		if w == hi>>6 {
			bitsOf &= ^uint64(0) >> (63 - hi&63)
		}
		n += bits.OnesCount64(bitsOf)
	}
	return n
}

// slotAt returns the slot of the address at depth d, and false if the list
// is not that deep. It walks the ring down from the top: the slot of the
// top's word at or below it, the words below, then the rest of the ring,
// which holds the oldest addresses.
func (l *classList) slotAt(d uint64) (int, bool) {
	if l.pushes == 0 || d >= listSpan {
		return 0, false
	}
	top := l.top()
	words := len(l.present)
	w := top >> 6
	bitsOf := l.present[w] & (^uint64(0) >> (63 - top&63))
	for range words + 1 {
		if n := uint64(bits.OnesCount64(bitsOf)); d >= n {
			d -= n
		} else {
			for ; d > 0; d-- {
				bitsOf &^= 1 << (63 - bits.LeadingZeros64(bitsOf))
			}
			return w<<6 + 63 - bits.LeadingZeros64(bitsOf), true
		}
		w = (w + words - 1) % words
		bitsOf = l.present[w]
		if w == top>>6 { // back at the top's word: the slots above the top
			bitsOf &^= ^uint64(0) >> (63 - top&63)
		}
	}
	return 0, false
}

// take removes the address in slot from the list and returns it.
func (l *classList) take(slot int) uint64 {
	l.present[slot>>6] &^= 1 << (slot & 63)
	return l.addrs[slot]
}

// heapState is the predictor state of one process within a block.
type heapState struct {
	handles   []handle // by handle number; handles[0] is never live
	numbered  uint32   // the highest handle number given out
	freeNums  []uint32 // released handle numbers, the next to reuse last
	serial    uint32   // the serial number of the latest allocation
	lastFreed uint64

	// recent holds the handle numbers of the latest allocations, the
	// latest at recent[recentAt]: a program frees mostly what it has just
	// allocated, and a rank among these is smaller than a handle.
	recent   [recentDepth]uint32
	recentAt uint8

	threads  []*threadState // in the order of their first event
	threadOf map[uint64]uint32
	spare    []*threadState // reset, for the next threads

	addrs addrTable // where the addresses are, when encoding
}

func (h *heapState) reset() {
	h.handles = append(h.handles[:0], handle{})
	h.numbered, h.serial = 0, 0
	h.freeNums = h.freeNums[:0]
	h.lastFreed = 0
	h.recent, h.recentAt = [recentDepth]uint32{}, 0
	h.spare = append(h.spare, h.threads...)
	h.threads = h.threads[:0]
	clear(h.threadOf)
	h.addrs.reset()
}

// thread returns the index of the state of thread id, starting it if the
// process has none yet in the block.
func (h *heapState) thread(id uint64) uint32 {
	if i, ok := h.threadOf[id]; ok {
		return i
	}
	if h.threadOf == nil {
		h.threadOf = make(map[uint64]uint32)
	}
	var t *threadState
	if n := len(h.spare); n > 0 {
		t = h.spare[n-1]
		h.spare = h.spare[:n-1]
	} else {
		t = new(threadState)
	}
	i := uint32(len(h.threads))
	t.reset(id, i)
	h.threads = append(h.threads, t)
	h.threadOf[id] = i
	return i
}

// allocate gives a handle number to a block of class c at addr, which
// thread ti allocated: the latest number released if there is one, else a
// new one. A live handle of the same address, if any, stays live: decoding
// never looks handles up by address.
func (h *heapState) allocate(ti uint32, addr uint64, c uint8) uint32 {
	var num uint32
	if n := len(h.freeNums); n > 0 {
		num = h.freeNums[n-1]
		h.freeNums = h.freeNums[:n-1]
	} else {
		h.numbered++
		num = h.numbered
		h.handles = append(h.handles, handle{})
	}
	h.serial++
	h.handles[num] = handle{addr: addr, serial: h.serial, thread: ti, class: c}
	h.recentAt = (h.recentAt + 1) % recentDepth
	h.recent[h.recentAt] = num

	t := h.threads[ti]
	if len(t.queue)-t.head >= 2*t.live+32 {
		h.compact(t)
	}
	t.queue = append(t.queue, queued{num: num, serial: h.serial})
	t.live++
	return num
}

// compact drops the released allocations from the queue of t. It runs
// when they are at least half of it, so it costs O(1) per allocation.
func (h *heapState) compact(t *threadState) {
	q := t.queue[:0]
	for _, e := range t.queue[t.head:] {
		if h.handles[e.num].serial == e.serial {
			q = append(q, e)
		}
	}
	t.queue, t.head = q, 0
}

// oldest returns the handle number of the oldest live block thread t
// allocated, and 0 if it has none.
func (h *heapState) oldest(t *threadState) uint32 {
	for t.head < len(t.queue) {
		e := t.queue[t.head]
		if h.handles[e.num].serial == e.serial {
			return e.num
		}
		t.head++
	}
	return 0
}

// live reports whether handle number num names a live block.
func (h *heapState) live(num uint64) bool {
	return num < uint64(len(h.handles)) && h.handles[num].serial != 0
}

// refCode returns the reference code of the live block with handle num,
// released by thread t: refOldest if it is the oldest live block of t's
// source thread, else its rank among the latest allocations if it is
// there, else its handle.
func (h *heapState) refCode(t *threadState, num uint32) uint64 {
	if h.oldest(h.threads[t.source]) == num {
		return refOldest
	}
	for rank := range recentDepth {
		if h.recent[(int(h.recentAt)-rank+recentDepth)%recentDepth] == num {
			return refRecent + uint64(rank)
		}
	}
	return refHandle + uint64(num) - 1
}

// handleOf returns the handle number a reference code other than
// refEscape names, for thread t (0 if it names none).
func (h *heapState) handleOf(t *threadState, code uint64) uint64 {
	switch {
	case code == refOldest:
		return uint64(h.oldest(h.threads[t.source]))
	case code < refHandle:
		return uint64(h.recent[(int(h.recentAt)-int(code-refRecent)+recentDepth)%recentDepth])
	}
	return code - refHandle + 1
}

// released says where release put an address: in the class list of a
// thread and a class, in a slot, and which address dropped out of that
// list for it.
type released struct {
	list    *classList // nil if the address went in no list
	thread  uint32
	class   uint8
	slot    int
	dropped uint64
	didDrop bool
}

// release releases the live block with handle num, by thread ti. The
// block's address becomes lastFreed and goes on the class list of its
// allocating thread, which becomes ti's source.
func (h *heapState) release(ti uint32, num uint32) released {
	hd := &h.handles[num]
	hd.serial = 0
	owner := h.threads[hd.thread]
	owner.live--
	h.threads[ti].source = hd.thread
	h.lastFreed = hd.addr
	h.freeNums = append(h.freeNums, num)
	r := released{thread: hd.thread, class: hd.class}
	if hd.class != 0 {
		r.list = owner.makeList(hd.class)
		r.slot, r.dropped, r.didDrop = r.list.push(hd.addr)
	}
	return r
}

// takeAt takes the address at depth d out of the class list of class c of
// thread ti, and returns false if there is no such address.
func (h *heapState) takeAt(ti uint32, c uint8, d uint64) (uint64, bool) {
	l := h.threads[ti].list(c)
	if l == nil || c == 0 {
		return 0, false
	}
	slot, ok := l.slotAt(d)
	if !ok {
		return 0, false
	}
	return l.take(slot), true
}

// heapStates holds the heapState of each process of a block.
type heapStates struct {
	byProcess map[uint64]*heapState
	spare     []*heapState // reset, ready for the next processes
	used      []*heapState
}

// get returns the state of process, starting it if the block has none yet.
func (hs *heapStates) get(process uint64) *heapState {
	if h, ok := hs.byProcess[process]; ok {
		return h
	}
	if hs.byProcess == nil {
		hs.byProcess = make(map[uint64]*heapState)
	}
	var h *heapState
	if n := len(hs.spare); n > 0 {
		h = hs.spare[n-1]
		hs.spare = hs.spare[:n-1]
	} else {
		h = new(heapState)
		h.reset()
	}
	hs.byProcess[process] = h
	hs.used = append(hs.used, h)
	return h
}

// reset forgets all processes, for a new block.
func (hs *heapStates) reset() {
	for _, h := range hs.used {
		h.reset()
	}
	hs.spare = append(hs.spare, hs.used...)
	hs.used = hs.used[:0]
	clear(hs.byProcess)
}
