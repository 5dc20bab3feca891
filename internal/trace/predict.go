package trace

// The predictors turn the addresses of events into small codes. Allocators
// hand out again the memory they were just given back, and a program frees
// mostly what it allocated recently, so within a block:
//
//   - a free (or the old address of a realloc) names a block allocated
//     earlier in the block by its handle, a small number, instead of its
//     address;
//   - an alloc (or the new address of a realloc) is most often the address
//     most recently freed in its size class, or the latest address freed;
//     and fresh memory, which allocators carve one block after the other,
//     is most often right after the previous fresh block, or a short step
//     from there.
//
// The state below is kept per process and starts afresh in every block, so
// that every block decodes alone. The Writer and the Reader update it with
// the same functions; docs/format.md gives the rules step by step.

// Class stacks: a LIFO of the latest addresses freed with each size class,
// up to classStackDepth deep, for the classes below numClasses. They are
// deeper than glibc's tcache (7 per class) because what it cannot hold
// goes to bins that are LIFO too, for small sizes, and a program that
// frees many blocks of one size often allocates as many again: on the
// malloc-dense benchmark, stacks 8 deep make the trace 11% bigger than 64.
const (
	classStackDepth = 64
	numClasses      = 256
	maxStackedSize  = 4072 // the largest size of a class below numClasses
)

// sizeClass returns the class of a block of size bytes, which is its glibc
// chunk size in units of 16 bytes: chunkSize(size) / 16. It returns 0 for
// sizes whose class has no stack; real classes start at 2.
func sizeClass(size uint64) uint {
	if size > maxStackedSize {
		return 0
	}
	return uint(max(2, (size+23)>>4))
}

// chunkSize returns the size of the chunk glibc carves for a block of size
// bytes: the size, 8 bytes of header, rounded up to 16, at least 32. (The
// arithmetic wraps for sizes near 2^64; it is only a predictor.)
func chunkSize(size uint64) uint64 {
	return max(32, (size+8+15)&^15)
}

// Address codes (streamAddr).
const (
	addrPop       = 0 // the top of the class stack of the block's size, popped
	addrLastFreed = 1 // the latest address freed in the process
	addrEscape    = 2 // the next value of the raw address stream
	// addrDeep and up to addrDelta-1: the address at depth
	// code-addrDeep+1 in the class stack, taken out of it. glibc serves a
	// class from more than its LIFO tcache (its smallbins are FIFO, say),
	// and on the malloc-dense loop a third of the addresses are there.
	addrDeep  = 3
	addrDelta = addrDeep + classStackDepth - 1 // and up: a step from next, the end of the previous fresh block
)

// maxOddStep bounds the steps that are not multiples of 16 that a delta
// code can hold; the Writer escapes to the raw stream for longer ones.
const maxOddStep = 1 << 61

// deltaCode returns the address code for a step of d bytes from next, and
// false if the step is too long for one. Steps that are multiples of 16
// are stored divided by 16, so they take four bits less: code - addrDelta
// is zigzag(d/16) << 1 for those, zigzag(d) << 1 | 1 for the others.
func deltaCode(d uint64) (uint64, bool) {
	if d&15 == 0 {
		return addrDelta + zigzag(int64(d)>>4)<<1, true
	}
	if int64(d) >= maxOddStep || int64(d) < -maxOddStep {
		return 0, false
	}
	return addrDelta + (zigzag(int64(d))<<1 | 1), true
}

// deltaStep returns the step a code of addrDelta or above stands for.
func deltaStep(code uint64) uint64 {
	v := code - addrDelta
	if v&1 == 0 {
		return unzigzag(v>>1) << 4
	}
	return unzigzag(v >> 1)
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// handle is what a handle number names when decoding: a block allocated
// earlier in this block of the trace.
type handle struct {
	addr  uint64
	class uint8 // sizeClass of its size
	live  bool
}

// classStack holds the latest addresses freed with one size class; when it
// is full, a push drops the oldest.
type classStack struct {
	top, n uint8 // addrs[top] is the latest; n are valid
	addrs  [classStackDepth]uint64
}

// heapState is the predictor state of one process within a block.
type heapState struct {
	handles   []handle // by handle number, when decoding; handles[0] is never live
	numbered  uint32   // the highest handle number given out
	freeNums  []uint32 // released handle numbers, the next to reuse last
	lastFreed uint64
	// next is where the block after the previous fresh one would start:
	// the address and chunk size of the latest allocation coded as a step
	// or an escape, added up.
	next uint64

	// Class stacks are made as classes are used, so that a process that
	// frees little costs little: a damaged block can name many processes.
	stackOf [numClasses]uint8 // 1 + index in stacks; 0 if none yet
	stacks  []classStack

	// recent holds the handle numbers of the latest allocations, the
	// latest at recent[recentAt]: a program frees mostly what it has just
	// allocated, and a rank among these is smaller than a handle.
	recent   [recentDepth]uint32
	recentAt uint8

	addrs addrTable // live addresses, when encoding
}

// Reference codes (streamRef).
const (
	refEscape = 0 // the next value of the raw address stream
	// refRecent and up to refHandle-1: the block allocated code-refRecent+1
	// allocations ago (1: the latest), still live.
	refRecent   = 1
	recentDepth = 16
	refHandle   = refRecent + recentDepth // and up: handle code-refHandle+1
)

func (h *heapState) reset() {
	h.handles = append(h.handles[:0], handle{})
	h.numbered = 0
	h.freeNums = h.freeNums[:0]
	h.lastFreed, h.next = 0, 0
	h.recent, h.recentAt = [recentDepth]uint32{}, 0
	h.stackOf = [numClasses]uint8{}
	h.stacks = h.stacks[:0]
	h.addrs.reset()
}

// allocated returns the handle number of a new block: the latest number
// released if there is one, else a new one. A live handle of the same
// address, if any, stays live: decoding never looks handles up by address.
func (h *heapState) allocated() uint32 {
	var num uint32
	if n := len(h.freeNums); n > 0 {
		num = h.freeNums[n-1]
		h.freeNums = h.freeNums[:n-1]
	} else {
		h.numbered++
		num = h.numbered
	}
	h.recentAt = (h.recentAt + 1) % recentDepth
	h.recent[h.recentAt] = num
	return num
}

// refCode returns the reference code of the live block with handle num:
// its rank among the latest allocations if it is there, else its handle.
func (h *heapState) refCode(num uint32) uint64 {
	for rank := range recentDepth {
		if h.recent[(int(h.recentAt)-rank+recentDepth)%recentDepth] == num {
			return refRecent + uint64(rank)
		}
	}
	return refHandle + uint64(num) - 1
}

// refHandleOf returns the handle number a reference code other than
// refEscape names (0 if it names none).
func (h *heapState) refHandleOf(code uint64) uint64 {
	if code < refHandle {
		return uint64(h.recent[(int(h.recentAt)-int(code-refRecent)+recentDepth)%recentDepth])
	}
	return code - refHandle + 1
}

// fresh records that a block of size bytes at addr was coded as a step or
// an escape: it is fresh memory, and the next fresh block is likely right
// after it.
func (h *heapState) fresh(addr, size uint64) {
	h.next = addr + chunkSize(size)
}

// freed records that the block at addr was released: num is its handle
// and class the class of its size, or both 0 if it had no handle (and so
// its size is unknown).
func (h *heapState) freed(addr uint64, num uint32, class uint8) {
	h.lastFreed = addr
	if num == 0 {
		return
	}
	h.freeNums = append(h.freeNums, num)
	if class != 0 {
		h.push(uint(class), addr)
	}
}

// handled records, when decoding, the block handle num names.
func (h *heapState) handled(num uint32, addr, size uint64) {
	hd := handle{addr: addr, class: uint8(sizeClass(size)), live: true}
	if int(num) == len(h.handles) {
		h.handles = append(h.handles, hd)
	} else {
		h.handles[num] = hd
	}
}

// live returns the block handle num names, when decoding, and false if it
// names none.
func (h *heapState) live(num uint64) (handle, bool) {
	if num >= uint64(len(h.handles)) || !h.handles[num].live {
		return handle{}, false
	}
	return h.handles[num], true
}

func (h *heapState) push(c uint, addr uint64) {
	i := h.stackOf[c]
	if i == 0 {
		h.stacks = append(h.stacks, classStack{})
		i = uint8(len(h.stacks))
		h.stackOf[c] = i
	}
	s := &h.stacks[i-1]
	s.top = (s.top + 1) % classStackDepth
	s.addrs[s.top] = addr
	s.n = min(s.n+1, classStackDepth)
}

// depthOf returns how deep addr is in the stack of class c (0: on top), or
// -1 if it is not there.
func (h *heapState) depthOf(c uint, addr uint64) int {
	i := h.stackOf[c]
	if i == 0 {
		return -1
	}
	s := &h.stacks[i-1]
	for d := 0; d < int(s.n); d++ {
		if s.addrs[(int(s.top)-d+classStackDepth)%classStackDepth] == addr {
			return d
		}
	}
	return -1
}

// take removes and returns the entry at depth d of the stack of class c,
// and false if the stack is not that deep. The entries above it move down.
func (h *heapState) take(c uint, d int) (uint64, bool) {
	i := h.stackOf[c]
	if i == 0 || d < 0 || d >= int(h.stacks[i-1].n) {
		return 0, false
	}
	s := &h.stacks[i-1]
	at := func(depth int) *uint64 { return &s.addrs[(int(s.top)-depth+classStackDepth)%classStackDepth] }
	addr := *at(d)
	for k := d; k > 0; k-- {
		*at(k) = *at(k - 1)
	}
	s.top = (s.top + classStackDepth - 1) % classStackDepth
	s.n--
	return addr, true
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
