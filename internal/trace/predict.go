package trace

import (
	"slices"
	"sync"
)

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
// handle number. Whether it is live is in heapState.serials.
type handle struct {
	addr   uint64
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
	// queue holds the thread's allocations in order, and queue[head] is
	// the oldest live one, unless head is len(queue) and the thread has
	// none. Those released behind head are dropped lazily: compaction
	// drops them once the queue has grown to compactAt. head moves on as
	// soon as the block at it is released, so that the oldest live block,
	// which every free looks at, takes no search.
	queue     []queued
	head      int
	compactAt int
	reserved  bool // queue is in a reservation (see reserved)
	// listOf gives the class list of each class: 1 + index in lists, 0
	// if there is none yet. Both are made when first needed, so that
	// a thread that frees little costs little: a damaged block can name
	// many threads.
	listOf *[numClasses]uint8
	lists  []classList
}

func (t *threadState) reset(id uint64, index uint32) {
	t.id, t.next, t.source = id, 0, index
	t.queue, t.head, t.compactAt = t.queue[:0], 0, 0
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
// listSpan pushes that have not been taken out again. They are kept in
// push order in a ring, the top (the latest) last, with nothing between
// them: taking an address out closes the gap. A depth is then an index
// from the top, and finding an address's depth is a scan of the top of
// the ring, which is contiguous: the Writer remembers nothing per address
// to find it, and a scan of a few cache lines costs less than the cache
// misses of looking addresses up in a table of every address listed.
// The ring grows to listSpan entries as pushes come; an entry is never
// more than listSpan pushes old, so a full ring drops its bottom on the
// next push.
type classList struct {
	addrs []uint64 // a power of two of them, at most listSpan
	// pushed holds the push number of each entry, modulo 2^16: entries
	// are at most listSpan pushes old, so that is enough to tell whether
	// the bottom one was pushed listSpan pushes ago.
	pushed []uint16
	bottom int    // the index in the ring of the oldest entry
	n      int    // how many entries the list holds
	pushes uint32 // how many addresses were pushed
	// bottomPushed is pushed[bottom] while the list holds entries: every
	// push checks it, and the list header is in the cache more often than
	// pushed.
	bottomPushed uint16
}

func (l *classList) reset() {
	l.bottom, l.n, l.pushes = 0, 0, 0
}

// push adds addr at the top of the list, and returns the address that
// dropped out of it, if one did: the address pushed listSpan pushes ago,
// if it is still there.
func (l *classList) push(addr uint64) (dropped uint64, didDrop bool) {
	mask := len(l.addrs) - 1
	if l.n > 0 && uint16(l.pushes)-l.bottomPushed == listSpan {
		dropped, didDrop = l.addrs[l.bottom], true
		l.bottom = (l.bottom + 1) & mask
		l.n--
		l.bottomPushed = l.pushed[l.bottom]
	}
	if l.n == len(l.addrs) {
		l.grow()
		mask = len(l.addrs) - 1
	}
	if l.n == 0 {
		l.bottomPushed = uint16(l.pushes)
	}
	i := (l.bottom + l.n) & mask
	l.addrs[i] = addr
	l.pushed[i] = uint16(l.pushes)
	l.n++
	l.pushes++
	return dropped, didDrop
}

// grow doubles the ring, which is full. It holds fewer than listSpan
// entries: a full one of listSpan has dropped its bottom before the push
// that grows it. The entries from index 0 to the bottom, if the ring has
// wrapped around, move to the new half, after the others.
func (l *classList) grow() {
	old := len(l.addrs)
	n := max(listMinSlots, 2*old)
	l.addrs, l.pushed = extend(l.addrs, n), extend(l.pushed, n)
	copy(l.addrs[old:], l.addrs[:l.bottom])
	copy(l.pushed[old:], l.pushed[:l.bottom])
}

// extend returns s at length n, reusing its memory if it has room.
func extend[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return append(s[:cap(s)], make([]T, n-cap(s))...)
}

// atTop reports whether addr is the latest address pushed on the list
// that is still there: depth 0, the commonest.
func (l *classList) atTop(addr uint64) bool {
	return l.n > 0 && l.addrs[(l.bottom+l.n-1)&(len(l.addrs)-1)] == addr
}

// depthOf returns the depth of addr in the list (how many of its
// addresses were pushed after it: the latest push of addr, if it is there
// twice), and -1 if it is not among the limit latest. It goes down the
// ring from the top: back to index 0, then down from the end of the ring.
func (l *classList) depthOf(addr uint64, limit int) int {
	m := min(l.n, limit)
	if m == 0 {
		return -1
	}
	end := (l.bottom + l.n - 1) & (len(l.addrs) - 1) // the top
	if l.addrs[end] == addr {                        // the most common depth
		return 0
	}
	upper := l.addrs[max(0, end+1-m) : end+1]
	for i := len(upper) - 1; i >= 0; i-- {
		if upper[i] == addr {
			return len(upper) - 1 - i
		}
	}
	if m -= len(upper); m > 0 { // around the end of the ring
		lower := l.addrs[len(l.addrs)-m:]
		for i := len(lower) - 1; i >= 0; i-- {
			if lower[i] == addr {
				return len(upper) + len(lower) - 1 - i
			}
		}
	}
	return -1
}

// takeTop takes the address at depth 0 out of the list, which is not
// empty, and returns it.
func (l *classList) takeTop() uint64 {
	l.n--
	return l.addrs[(l.bottom+l.n)&(len(l.addrs)-1)]
}

// takeAt takes the address at depth d out of the list and returns it, or
// returns false if the list is not that deep. The entries on the shorter
// side of it move over to close the gap.
func (l *classList) takeAt(d uint64) (uint64, bool) {
	if d >= uint64(l.n) {
		return 0, false
	}
	if d == 0 { // the most common depth
		return l.takeTop(), true
	}
	mask := len(l.addrs) - 1
	i := l.n - 1 - int(d) // from the bottom
	at := (l.bottom + i) & mask
	addr := l.addrs[at]
	if int(d) <= i {
		l.closeDown(at, int(d))
	} else {
		l.closeUp(at, i)
		l.bottom = (l.bottom + 1) & mask
		l.bottomPushed = l.pushed[l.bottom] // moved up, unless it was taken
	}
	l.n--
	return addr, true
}

// closeDown moves the k entries above ring index at down by one, over it.
// They move in runs that do not wrap around the end of the ring, each in
// one copy: on programs that free across threads, glibc hands addresses
// back from deep in the lists, and moving their entries one at a time,
// masking both indexes of each, costs more than the copy.
func (l *classList) closeDown(at, k int) {
	for k > 0 {
		from := at + 1
		if from == len(l.addrs) { // the entry above is at index 0
			l.addrs[at], l.pushed[at] = l.addrs[0], l.pushed[0]
			at, k = 0, k-1
			continue
		}
		run := min(k, len(l.addrs)-from)
		copy(l.addrs[at:at+run], l.addrs[from:from+run])
		copy(l.pushed[at:at+run], l.pushed[from:from+run])
		at, k = from+run-1, k-run
	}
}

// closeUp moves the k entries below ring index at up by one, over it, in
// runs as closeDown does.
func (l *classList) closeUp(at, k int) {
	for k > 0 {
		if at == 0 { // the entry below is at the end of the ring
			last := len(l.addrs) - 1
			l.addrs[0], l.pushed[0] = l.addrs[last], l.pushed[last]
			at, k = last, k-1
			continue
		}
		run := min(k, at)
		copy(l.addrs[at-run+1:at+1], l.addrs[at-run:at])
		copy(l.pushed[at-run+1:at+1], l.pushed[at-run:at])
		at, k = at-run, k-run
	}
}

// heapState is the predictor state of one process within a block.
type heapState struct {
	handles []handle // by handle number; handles[0] is never live
	// serials holds, by handle number, the serial number of the handle's
	// allocation, 0 once it is released. It is apart from handles so that
	// the checks of whether the allocations in the queues are still live,
	// which go through handles in no order, find the serials of a few
	// thousand handles in a few cache lines.
	serials   []uint32
	freeNums  []uint32 // released handle numbers, the next to reuse last
	serial    uint32   // the serial number of the latest allocation
	lastFreed uint64

	// recent holds the handle numbers of the latest allocations, the
	// latest at recent[recentAt]: a program frees mostly what it has just
	// allocated, and a rank among these is smaller than a handle. (The
	// Writer finds ranks from serial numbers instead: see refCode.)
	recent   [recentDepth]uint32
	recentAt uint8

	// threads holds the state of each thread, in the order of their first
	// event, by value: every event reaches one or two of them, and a
	// pointer to follow would be one more cache miss. Those past the end
	// are from earlier blocks: the next threads reuse their memory.
	threads  []threadState
	threadOf map[uint64]uint32

	liveAddrs addrTable // the handle of each live address, when encoding
	reserved  bool      // handles and serials are in reservations (see reserved)
}

func (h *heapState) reset() {
	h.handles = append(h.handles[:0], handle{})
	h.serials = append(h.serials[:0], 0)
	h.serial = 0
	h.freeNums = h.freeNums[:0]
	h.lastFreed = 0
	h.recent, h.recentAt = [recentDepth]uint32{}, 0
	h.threads = h.threads[:0]
	clear(h.threadOf)
	h.liveAddrs.reset()
}

// maxScannedThreads is how many threads a process may have before thread
// looks them up in a map rather than going through them: a context switch
// in a process of a few threads, the common case, then needs no hashing.
const maxScannedThreads = 8

// thread returns the index of the state of thread id, starting it if the
// process has none yet in the block.
func (h *heapState) thread(id uint64) uint32 {
	if len(h.threads) <= maxScannedThreads {
		for i := range h.threads {
			if h.threads[i].id == id {
				return uint32(i)
			}
		}
	} else if i, ok := h.threadOf[id]; ok {
		return i
	}
	if h.threadOf == nil {
		h.threadOf = make(map[uint64]uint32)
	}
	i := uint32(len(h.threads))
	if len(h.threads) < cap(h.threads) {
		h.threads = h.threads[:i+1] // reuse the memory of a reset thread
	} else {
		h.threads = append(h.threads, threadState{})
	}
	h.threads[i].reset(id, i)
	h.threadOf[id] = i
	return i
}

// allocate gives a handle number to a block of class c at addr, which
// thread ti allocated: the latest number released if there is one, else a
// new one. A live handle of the same address, if any, stays live: decoding
// never looks handles up by address.
//
// Where roomToAllocate holds, as it does but every few hundred blocks, it
// calls nothing and grows nothing (reslicing within the room rather than
// appending leaves no call to growslice), so that the Writer's commonest
// allocations keep their values in registers (see
// Writer.appendAddrFast).
func (h *heapState) allocate(ti uint32, addr uint64, c uint8) uint32 {
	t := &h.threads[ti]
	if !h.roomToAllocate(t) {
		h.makeRoom(t)
	}
	h.serial++
	serial := h.serial
	num := h.number(handle{addr: addr, thread: ti, class: c}, serial)
	at := (h.recentAt + 1) % recentDepth
	h.recentAt = at
	h.recent[at] = num
	n := len(t.queue)
	t.queue = t.queue[:n+1]
	t.queue[n] = queued{num: num, serial: serial}
	return num
}

// number gives hd, allocated as number serial, a handle number: the
// latest released one, else highest + 1 (the length of handles). The
// tables are resliced in place, within the room roomToAllocate checked,
// which costs no write barrier.
func (h *heapState) number(hd handle, serial uint32) uint32 {
	var num uint32
	if n := len(h.freeNums) - 1; n >= 0 {
		num = h.freeNums[n]
		h.freeNums = h.freeNums[:n]
	} else {
		num = uint32(len(h.handles))
		h.handles = h.handles[:num+1]
		h.serials = h.serials[:num+1]
	}
	h.handles[num] = hd
	h.serials[num] = serial
	return num
}

// roomToAllocate reports whether allocate may allocate a block of thread
// t without making room: there is a released handle number or room for a
// new one, and room in t's queue with no compaction due.
func (h *heapState) roomToAllocate(t *threadState) bool {
	return (len(h.freeNums) > 0 || len(h.handles) < cap(h.handles) && len(h.serials) < cap(h.serials)) &&
		len(t.queue) < t.compactAt && len(t.queue) < cap(t.queue)
}

// allocateRoom returns how many blocks allocate may allocate for thread t
// one after the other, as long as nothing is released, before
// roomToAllocate fails.
func (h *heapState) allocateRoom(t *threadState) int {
	handles := len(h.freeNums) + min(cap(h.handles)-len(h.handles), cap(h.serials)-len(h.serials))
	return max(0, min(handles, t.compactAt-len(t.queue), cap(t.queue)-len(t.queue)))
}

// makeRoom does what roomToAllocate finds missing: it compacts the queue
// of t if that is due, and grows it and the handles, moving them to
// reservations once they are big enough to (see full). A block holds
// fewer events than it has bytes: maxBlockRaw handles are always enough.
//
//go:noinline
func (h *heapState) makeRoom(t *threadState) {
	if len(t.queue) >= t.compactAt {
		h.compact(t)
	}
	if len(t.queue) == cap(t.queue) {
		if full(t.queue, t.reserved) {
			// Owned by h: the threads move when h.threads grows.
			t.reserved = true
			t.queue = reserved(t.queue, maxBlockRaw, h)
		} else {
			t.queue = slices.Grow(t.queue, 1)
		}
	}
	if len(h.freeNums) > 0 {
		return
	}
	if full(h.handles, h.reserved) {
		h.reserved = true
		h.handles = reserved(h.handles, maxBlockRaw, h)
		h.serials = reserved(h.serials, maxBlockRaw, h)
	}
	if len(h.handles) == cap(h.handles) {
		h.handles = slices.Grow(h.handles, 1)
	}
	if len(h.serials) == cap(h.serials) {
		h.serials = slices.Grow(h.serials, 1)
	}
}

// compact drops the released allocations from the queue of t, and sets
// it to run again once the queue has grown to 32 more than four times the
// live ones it keeps, so that it costs O(1) per allocation: 4/3 checks of
// an entry at most. Blocks are released in any order, and a branch on
// whether each entry is live would be mispredicted half the time: every
// entry is copied, and the count of those kept moves on only over the
// live ones. (It is not inlined: in allocate, the loop would run short
// of registers.)
//
//go:noinline
func (h *heapState) compact(t *threadState) {
	q, serials := t.queue, h.serials
	n := 0
	for _, e := range q[t.head:] {
		q[n] = e
		if serials[e.num] == e.serial {
			n++
		}
	}
	t.queue, t.head = q[:n], 0
	t.compactAt = 4*n + 32
}

// oldest returns the handle number of the oldest live block thread t
// allocated, and 0 if it has none.
func (h *heapState) oldest(t *threadState) uint32 {
	if t.head < len(t.queue) {
		return t.queue[t.head].num
	}
	return 0
}

// live reports whether handle number num names a live block.
func (h *heapState) live(num uint64) bool {
	return num < uint64(len(h.serials)) && h.serials[num] != 0
}

// refCode returns the reference code of the live block with handle num,
// which thread owner allocated and thread ti releases: refOldest if it is
// the oldest live block of ti's source thread, else its rank among the
// latest allocations if it is there, else its handle.
//
// The rank is the number of allocations since the block's, found without
// going through recent: the block is live, so no later allocation got its
// handle, and its smallest rank in recent is that of its own allocation.
func (h *heapState) refCode(ti, num, owner uint32) uint64 {
	if owner == h.threads[ti].source && h.oldest(&h.threads[owner]) == num {
		return refOldest
	}
	if rank := h.serial - h.serials[num]; rank < recentDepth {
		return refRecent + uint64(rank)
	}
	return refHandle + uint64(num) - 1
}

// handleOf returns the handle number a reference code other than
// refEscape names, for thread t (0 if it names none).
func (h *heapState) handleOf(t *threadState, code uint64) uint64 {
	switch {
	case code == refOldest:
		return uint64(h.oldest(&h.threads[t.source]))
	case code < refHandle:
		return uint64(h.recent[(int(h.recentAt)-int(code-refRecent)+recentDepth)%recentDepth])
	}
	return code - refHandle + 1
}

// release releases the live block with handle num, by thread ti. The
// block's address becomes lastFreed and goes on the class list of its
// allocating thread, which becomes ti's source. It returns the address
// that dropped out of that list, if one did.
func (h *heapState) release(ti uint32, num uint32) (dropped uint64, didDrop bool) {
	hd := h.handles[num]
	h.serials[num] = 0
	h.freeNums = append(h.freeNums, num)
	h.lastFreed = hd.addr
	threads := h.threads
	threads[ti].source = hd.thread
	owner := &threads[hd.thread]
	if q := owner.queue; q[owner.head].num == num {
		// The oldest live block of owner: move on to the next one.
		owner.head = h.nextLive(q, owner.head+1)
	}
	if hd.class != 0 {
		return owner.makeList(hd.class).push(hd.addr)
	}
	return 0, false
}

// nextLive returns the index of the first allocation in q from i on that
// is live, or len(q) if there is none.
func (h *heapState) nextLive(q []queued, i int) int {
	serials := h.serials
	for i < len(q) && serials[q[i].num] != q[i].serial {
		i++
	}
	return i
}

// takeAt takes the address at depth d out of the class list of class c of
// thread ti, and returns false if there is no such address.
func (h *heapState) takeAt(ti uint32, c uint8, d uint64) (uint64, bool) {
	l := h.threads[ti].list(c)
	if l == nil || c == 0 {
		return 0, false
	}
	return l.takeAt(d)
}

// heapStates holds the heapState of each process of a block.
type heapStates struct {
	byProcess map[uint64]*heapState
	spare     []*heapState // reset, ready for the next processes
	used      []*heapState
	// last is the state of process lastProcess, the latest that get
	// returned: a switch of context is most often to another thread of
	// the same process, and needs no hashing then.
	last        *heapState
	lastProcess uint64
}

// get returns the state of process, starting it if the block has none yet.
func (hs *heapStates) get(process uint64) *heapState {
	if hs.last != nil && process == hs.lastProcess {
		return hs.last
	}
	if h, ok := hs.byProcess[process]; ok {
		hs.last, hs.lastProcess = h, process
		return h
	}
	if hs.byProcess == nil {
		hs.byProcess = make(map[uint64]*heapState)
	}
	var h *heapState
	if n := len(hs.spare); n > 0 {
		h = hs.spare[n-1]
		hs.spare = hs.spare[:n-1]
	} else if p, ok := heapPool.Get().(*heapState); ok {
		h = p
	} else {
		h = new(heapState)
		h.reset()
	}
	hs.byProcess[process] = h
	hs.used = append(hs.used, h)
	hs.last, hs.lastProcess = h, process
	return h
}

// heapPool holds the reset heap states of closed Writers, for new ones:
// the tables and lists of a process grow to hundreds of KiB, and growing
// them anew in every Writer costs more than a short trace does.
var heapPool sync.Pool // of *heapState

// recycle resets the states and gives them to heapPool.
func (hs *heapStates) recycle() {
	hs.reset()
	for _, h := range hs.spare {
		heapPool.Put(h)
	}
	hs.spare = nil
}

// reset forgets all processes, for a new block.
func (hs *heapStates) reset() {
	for _, h := range hs.used {
		h.reset()
	}
	hs.spare = append(hs.spare, hs.used...)
	hs.used = hs.used[:0]
	clear(hs.byProcess)
	hs.last = nil
}
