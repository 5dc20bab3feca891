package analysis

import (
	"maps"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/memtrail/memtrail/internal/addrmap"
	"github.com/memtrail/memtrail/internal/pages"
	"github.com/memtrail/memtrail/internal/trace"
)

// heapTable holds the blocks of a process live now, by address, and
// remembers the latest maxFreed frees, so that the free of an address that
// is not live can be told a double free (and show where the block was
// freed first) or the free of an address never allocated. Like valgrind,
// whose queue of freed blocks is bounded too, it takes a free long after
// the first for an invalid free.
//
// Finding a block is most of the replay's work. An allocation must look
// its address up (a block live there already lost its free), but most
// frees need not: the trace names the blocks freed in the trace block
// that allocated them by handle (trace.Event.Handle), and the handle
// table leads from the handle to the block, in an arena, without hashing.
// Only the blocks that outlive their trace block go into the address
// index, and are freed by address.
//
// The frees go, in order, into a ring that is only searched for a free
// that finds no live block (a double or invalid free: rare), and a Bloom
// filter of the ring's addresses spares most of those searches.
type heapTable struct {
	// arena holds the live blocks, packed, in chunks so that it grows
	// without copying, and refs to them are stable while they live; a
	// released ref goes on the free list (refs + 1; 0 ends it, linked
	// through liveBlock.size) and is given out again first, so that the
	// arena's hot part stays small.
	arena    []*arenaChunk
	shared   []bool // by chunk: the chunk may be another table's too (see clone)
	refs     uint32 // refs given out so far
	freeRefs uint32
	// spare brings the arena's next chunk, made ahead by grow (nil
	// until the arena is big enough for that to pay).
	spare chan *arenaChunk
	// big holds, by ref, the blocks whose fields do not fit a liveBlock
	// (see pack): rare, so a map.
	big map[uint32]block
	// replaced and taken are the blocks the latest put replaced and the
	// latest take ended, unpacked.
	replaced, taken block
	// index holds the blocks of earlier trace blocks by address (nil
	// until it has some). It is reached through indexNow, which waits
	// for the flight putting a trace block's blocks into it.
	index *addrmap.Map
	// flight, if not nil, is putting the blocks of the trace block
	// before this one into index, on another goroutine (see enterNew):
	// nothing else reads or writes index, or the handle table drained,
	// until settle has waited for it.
	flight  *indexFlight
	drained handleTable
	// grounded is how many trace blocks are left before the next
	// flight: when the replay needed the index before a flight had
	// landed, the flight only moved the work to another core and the
	// index's pages back, and the next few trace blocks go in at once.
	grounded int
	// highs holds, for each 2 MiB of address space, the highest address
	// of a block that went into the index there, in flight or not: an
	// allocation above it has no block of an earlier trace block to
	// replace, and need not wait for the flight to look. Allocators carve
	// fresh memory upwards, so on a growing heap most allocations are.
	highs highTable
	// handles maps the handles of trace block inBlock to their blocks:
	// a free that names its block by handle finds it there, without
	// looking its address up.
	//
	// A live block is in one place only: the index, the handle table
	// or strays; a handle is dropped when its block is freed or moves
	// to the index. So the place a block is found in tells whether the
	// index has it, and moving a trace block's blocks to the index
	// reads none of them in the arena.
	handles handleTable
	inBlock uint32
	// entering holds the blocks that go into the index next: a flight's
	// while one is on.
	entering *entering
	// strays are the blocks whose handle a later allocation of their trace
	// block was given too (only a damaged trace does that): live, but
	// found neither by handle nor by address.
	strays []stray
	// ring holds the latest frees, the newest at ring[(next-1) % maxFreed]
	// once it is full, each beside its address: every free writes one
	// entry, in one stream of memory, and only a rare search reads them.
	ring []freedAt
	next int
	// seen is a Bloom filter of the addresses in ring. It is made at the
	// first free that finds no live block, and kept from then on: a
	// program that frees nothing wrong never pays for it.
	seen bloom
}

// liveBlock is a block in the arena, packed into 24 bytes: the arena holds
// every live block, and the table's memory follows its size. Its address
// is not there: the index or the handle table has it.
type liveBlock struct {
	born uint64
	size uint32 // when released: the next free ref + 1
	site int32
	// bits holds bornClock, thread, reallocs and api in the widths below,
	// and the flags.
	bits uint64
}

// arenaChunk is a chunk of heapTable.arena: an array, not a slice, so
// that a block is found without loading and checking the chunk's length.
type arenaChunk [1 << chunkBits]liveBlock

// The fields of liveBlock.bits. A block whose fields do not fit (a size of
// 4 GiB or more, a thread index past 1,023, more than 62 reallocs, ...) is
// kept whole in heapTable.big, with bitBig set.
const (
	clockBits    = 40
	threadBits   = 10
	reallocsBits = 6
	apiBits      = 5

	threadShift   = clockBits
	reallocsShift = threadShift + threadBits
	apiShift      = reallocsShift + reallocsBits

	bitLive = 1 << 61
	bitBig  = 1 << 63 // the block is in heapTable.big
)

// maxFreed is how many frees are remembered: a power of 2, so that the
// ring goes round with a mask (the constant below does not compile
// otherwise).
const maxFreed = 1 << 16

const _ uint = -(maxFreed & (maxFreed - 1))

// maxHandle bounds the handles kept in the handle table: a damaged trace
// may name any. The blocks of higher handles are found by address.
const maxHandle = 1 << 26

// freedBlock is what a heapTable remembers of a freed block.
type freedBlock struct {
	size      uint64
	freeStack uint64
	site      int32
	api       trace.API
}

// freedAt is a free in heapTable's ring: the address and what is
// remembered of the block.
type freedAt struct {
	addr uint64
	freedBlock
}

// entering is a batch of blocks going into the address index: their
// addresses and refs, and the refs of the blocks they replace there.
type entering struct {
	addrs []uint64
	refs  []uint32
	olds  []uint32
}

// indexFlight is a handle table being put into the address index on a
// goroutine of its own (see enterNew). done is closed when it is; the
// refs of the blocks it replaced there are then in entering.olds, for
// the replay to drop: the arena is the replay's alone.
type indexFlight struct {
	idx      *addrmap.Map
	ht       handleTable
	entering *entering
	// taken is set by whoever does the work: the flight's goroutine, or
	// the replay if it needs the index before that goroutine has begun
	// (the other cores are busy decoding, say), so as not to wait for it
	// to be scheduled.
	taken atomic.Bool
	done  chan struct{}
}

// run puts the flight's blocks into the index, unless that is taken.
func (f *indexFlight) run() bool {
	if !f.taken.CompareAndSwap(false, true) {
		return false
	}
	f.entering.olds = indexHandles(f.idx, &f.ht, f.entering, f.entering.olds[:0])
	close(f.done)
	return true
}

// stray is a live block that neither the index nor the handle table has.
type stray struct {
	ref  uint32
	addr uint64
}

// put makes b the live block at addr, with handle h of trace block blk
// (h 0: none), and returns the block that was live at addr, if one was
// (its free was lost): valid until the next put.
//
// A block with a handle goes into the handle table only: the trace names
// it by its handle if it frees it in the same trace block, and writes a
// lost free (trace.APILost) before an allocation over it there. It goes
// into the address index when its trace block ends (see enter). So only
// the blocks of earlier trace blocks need looking up here.
//
// Blocks go in and out by pointer: a block passed or returned whole is
// written 8 bytes at a time and read back 16 at a time, and the CPU waits
// for the writes each time.
func (t *heapTable) put(addr uint64, h, blk uint32, b *block) (old *block, replaced bool) {
	t.enter(blk)
	// The entry of addr's 2 MiB in highs: valid to the end, for nothing
	// below looks another up.
	high := t.highs.cached(addr)
	if high == nil {
		high = t.highs.swap(addr >> highBits)
	}
	if addr <= *high {
		if ref, ok := t.indexNow().Find(addr); ok {
			// Rare: a copy, for its ref is given out again at once.
			t.unpackTo(&t.replaced, ref)
			replaced = true
			old = &t.replaced
			t.unlink(ref, addr, true)
		}
	}
	// newRef, without its call where the arena's current chunk has room
	// and no ref is free, as while a heap grows.
	var ref uint32
	if t.freeRefs == 0 && t.refs>>chunkBits < uint32(len(t.arena)) {
		ref = t.refs
		t.refs++
	} else {
		ref = t.newRef()
	}
	// pack, without its call and its test of the block there before: a
	// ref given out is released, so not in big.
	lb := t.atw(ref)
	if fits(b) {
		lb.born, lb.site, lb.size = b.born, b.site, uint32(b.size)
		lb.bits = bitLive | b.bornClock | uint64(b.thread)<<threadShift |
			uint64(b.reallocs)<<reallocsShift | uint64(b.api)<<apiShift
	} else {
		t.packBig(ref, lb, b, bitLive)
	}
	if h != 0 && h < maxHandle {
		c, e := t.handles.grow(h)
		if e.ref1 == 0 {
			c.used++
		} else if t.at(e.ref1-1).bits&bitLive != 0 {
			t.strays = append(t.strays, stray{e.ref1 - 1, e.addr})
		}
		e.ref1, e.addr = ref+1, addr
		*high = max(*high, addr)
	} else {
		t.addToIndex(ref, addr)
	}
	return old, replaced
}

// highTable holds the highest address of the blocks that went into the
// index (or will, at the end of their trace block) in each 2 MiB of
// address space (0 for one with none). The latest are kept in a small
// table by a hash of their number (a program's heaps lie a power of two
// apart: glibc's arenas 64 MiB), the others in a map: an allocation looks
// its 2 MiB up.
type highTable struct {
	near [nearHighs]struct {
		key  uint64 // the number of the 2 MiB + 1; 0: none
		high uint64
	}
	far map[uint64]uint64
}

const (
	nearBits  = 6
	nearHighs = 1 << nearBits
	highBits  = 21 // 2 MiB
)

// nearOf returns where the entry of 2 MiB number k goes in
// highTable.near.
func nearOf(k uint64) uint64 { return k * 0x9e3779b97f4a7c15 >> (64 - nearBits) }

// slot returns the entry of addr's 2 MiB in near, bringing it there.
func (h *highTable) slot(addr uint64) *uint64 {
	if high := h.cached(addr); high != nil {
		return high
	}
	return h.swap(addr >> highBits)
}

// cached returns the entry of addr's 2 MiB if near has it, else nil.
func (h *highTable) cached(addr uint64) *uint64 {
	// Small enough to inline: every allocation calls it.
	k := addr >> highBits
	if n := &h.near[nearOf(k)]; n.key == k+1 {
		return &n.high
	}
	return nil
}

// swap brings the entry of the 2 MiB numbered k into near, and the one it
// takes the place of into far, and returns it. (Not inlined: put inlines
// cached, and seldom calls it.)
//
//go:noinline
func (h *highTable) swap(k uint64) *uint64 {
	n := &h.near[nearOf(k)]
	if h.far == nil {
		h.far = make(map[uint64]uint64)
	}
	if n.key != 0 {
		h.far[n.key-1] = n.high
	}
	n.key, n.high = k+1, h.far[k]
	delete(h.far, k)
	return &n.high
}

// add takes in a block at addr that goes into the index.
func (h *highTable) add(addr uint64) {
	high := h.slot(addr)
	*high = max(*high, addr)
}

func (h *highTable) clone() highTable {
	c := *h
	c.far = maps.Clone(h.far)
	return c
}

// indexNow returns the address index, once the flight putting blocks into
// it has landed.
func (t *heapTable) indexNow() *addrmap.Map {
	t.settle()
	if t.index == nil {
		t.index = new(addrmap.Map)
	}
	return t.index
}

// settle waits for the flight, if one is on, and drops the blocks it
// replaced in the index.
func (t *heapTable) settle() {
	// Small enough to inline: most allocations call it, with no flight
	// on.
	if t.flight != nil {
		t.land(true)
	}
}

// land is settle with a flight on. With ground set, a flight that has not
// landed yet grounds the next few (see grounded).
func (t *heapTable) land(ground bool) {
	f := t.flight
	select {
	case <-f.done:
	default:
		if ground {
			t.grounded = groundedBlocks
		}
	}
	if !f.run() {
		<-f.done
	}
	t.flight = nil
	t.settleOlds(f.entering)
	t.entering = f.entering
}

// pack writes b, with flags, into the arena at ref.
func (t *heapTable) pack(ref uint32, b *block, flags uint64) {
	lb := t.atw(ref)
	// Only a table with big blocks reads lb first: a new chunk of the
	// arena is fresh memory, and a read before the first write maps it
	// twice (a zero page, then a copy).
	if len(t.big) != 0 && lb.bits&bitBig != 0 || !fits(b) {
		t.packBig(ref, lb, b, flags)
		return
	}
	lb.born, lb.site, lb.size = b.born, b.site, uint32(b.size)
	lb.bits = flags | b.bornClock | uint64(b.thread)<<threadShift |
		uint64(b.reallocs)<<reallocsShift | uint64(b.api)<<apiShift
}

// packBig is pack for a block whose fields do not fit a liveBlock, or
// over one that did not.
func (t *heapTable) packBig(ref uint32, lb *liveBlock, b *block, flags uint64) {
	delete(t.big, ref)
	lb.bits = 0
	if fits(b) {
		t.pack(ref, b, flags)
		return
	}
	if t.big == nil {
		t.big = make(map[uint32]block)
	}
	t.big[ref] = *b
	lb.born, lb.site, lb.size = b.born, b.site, 0
	lb.bits = flags | bitBig
}

// fits reports whether b's fields fit a liveBlock.
func fits(b *block) bool {
	return b.size>>32|b.bornClock>>clockBits|uint64(b.thread>>threadBits|b.reallocs>>reallocsBits)|uint64(b.api>>apiBits) == 0
}

// unpack returns the block at ref.
func (t *heapTable) unpack(ref uint32) block {
	var b block
	t.unpackTo(&b, ref)
	return b
}

// unpackTo writes the block at ref to b, field by field: a block built
// apart and copied whole is written 8 bytes at a time and read back 16 at
// a time, and the CPU waits for the writes.
func (t *heapTable) unpackTo(b *block, ref uint32) {
	lb := t.at(ref)
	if lb.bits&bitBig != 0 {
		*b = t.big[ref]
		return
	}
	lb.unpackTo(b)
}

// unpackTo writes the fields of lb, a block packed whole, to b.
func (lb *liveBlock) unpackTo(b *block) {
	bits := lb.bits
	b.size, b.born, b.site = uint64(lb.size), lb.born, lb.site
	b.bornClock = bits & (1<<clockBits - 1)
	b.thread = uint32(bits >> threadShift & (1<<threadBits - 1))
	b.reallocs = uint32(bits >> reallocsShift & (1<<reallocsBits - 1))
	b.api = trace.API(bits >> apiShift & (1<<apiBits - 1))
}

// enter makes blk the trace block whose handles the handle table holds.
// The blocks of the one before that are still live go into the address
// index: later trace blocks free them by address.
func (t *heapTable) enter(blk uint32) {
	// Small enough to inline: every put and take calls it, and most
	// stay in the trace block.
	if blk != t.inBlock {
		t.enterNew(blk)
	}
}

// enterNew moves on to trace block blk. The blocks of the handle table
// go into the index on another goroutine, a flight, while the replay goes
// on with the handle table drained before: on a big heap that is most of
// what an allocation costs, and the replay is the analysis's slowest
// stage. The replay waits for the flight (settle), or does its work if it
// has not begun, only when it needs the index: to free a block by
// address, or to allocate at an address the index may have (see highs).
// A few blocks go in at once (see flightMin).
func (t *heapTable) enterNew(blk uint32) {
	t.inBlock = blk
	n := t.handles.len()
	if n == 0 {
		return
	}
	if t.flight != nil {
		// The flight before, still on after a whole trace block, has
		// spared the replay that block's work all the same.
		t.land(false)
	}
	idx := t.indexNow()
	if t.entering == nil {
		t.entering = new(entering)
	}
	if n < flightMin || t.grounded > 0 {
		t.grounded = max(t.grounded-1, 0)
		t.entering.olds = indexHandles(idx, &t.handles, t.entering, t.entering.olds[:0])
		t.settleOlds(t.entering)
		return
	}
	f := &indexFlight{idx: idx, ht: t.handles, entering: t.entering, done: make(chan struct{})}
	t.entering = nil
	t.handles, t.drained = t.drained, t.handles
	t.flight = f
	go f.run()
}

// flightMin is how many blocks a trace block must leave to the index for
// them to go in on a flight: fewer cost less than the goroutine and the
// index's pages brought back from another core. (A variable, so that
// tests can fly every trace block.)
var flightMin = 1 << 15

// groundedBlocks is how many trace blocks go into the index at once after
// a flight the replay had to wait for (or do itself). (A variable, so
// that tests can fly every trace block.)
var groundedBlocks = 8

// settleOlds drops the blocks that e's batch replaced in the index.
func (t *heapTable) settleOlds(e *entering) {
	for _, old := range e.olds {
		// As in addToIndex: the older of two blocks at one address
		// lost its free.
		t.dropRef(old)
	}
	e.olds = e.olds[:0]
}

// enterBatch is how many blocks indexHandles puts into the index at once.
const enterBatch = 4096

// indexHandles puts the blocks of ht's handles, all live and none in the
// index (see heapTable.handles), into idx, and drops ht's handles in the
// same pass (keeping its chunks for a later trace block). It appends to
// olds the refs of the blocks they replaced, and returns it. The blocks go
// in batches, through e, in the order of their handles, which is mostly
// the order of their addresses (see addrmap.Map.PutAll). It touches
// neither the arena nor the heap table: it runs on a flight.
func indexHandles(idx *addrmap.Map, ht *handleTable, e *entering, olds []uint32) []uint32 {
	// The batch is filled by index, not appended to: the loop then keeps
	// its length in a register.
	addrs, refs := slices.Grow(e.addrs[:0], enterBatch)[:enterBatch], slices.Grow(e.refs[:0], enterBatch)[:enterBatch]
	n := 0
	for _, c := range ht.chunks {
		if c.used == 0 {
			continue
		}
		for i := range c.entries {
			en := &c.entries[i]
			if en.ref1 == 0 {
				continue
			}
			addrs[n], refs[n] = en.addr, en.ref1-1
			en.ref1 = 0
			if n++; n == enterBatch {
				olds = idx.PutAll(addrs, refs, olds)
				n = 0
			}
		}
		c.used = 0
	}
	olds = idx.PutAll(addrs[:n], refs[:n], olds)
	e.addrs, e.refs = addrs[:0], refs[:0]
	return olds
}

// addToIndex puts the live block of ref, at addr, into the address index.
func (t *heapTable) addToIndex(ref uint32, addr uint64) {
	t.highs.add(addr)
	if old, had := t.indexNow().Put(addr, ref); had {
		// Two blocks of different trace blocks at one address, which
		// put prevents: the older lost its free. (Only a trace of
		// another writer, without lost frees, gets here.)
		t.dropRef(old)
	}
}

// unlink takes the live block of ref, at addr, out of the table (out of
// the index too if indexed says it is there).
func (t *heapTable) unlink(ref uint32, addr uint64, indexed bool) {
	if indexed {
		t.indexNow().Remove(addr)
	}
	lb := t.atw(ref)
	if lb.bits&bitBig != 0 {
		delete(t.big, ref)
	}
	lb.bits, lb.size = 0, t.freeRefs
	t.freeRefs = ref + 1
}

// chunkBits sets the size of the arena's chunks: 4,096 blocks.
const chunkBits = 12

// at returns the block of ref, to read.
func (t *heapTable) at(ref uint32) *liveBlock {
	return &t.arena[ref>>chunkBits][ref&(1<<chunkBits-1)]
}

// atw returns the block of ref, to change: its chunk is t's own.
func (t *heapTable) atw(ref uint32) *liveBlock {
	t.own(int(ref >> chunkBits))
	return &t.arena[ref>>chunkBits][ref&(1<<chunkBits-1)]
}

// own makes chunk i of the arena t's own, copying it if it may be shared.
func (t *heapTable) own(i int) {
	if i < len(t.shared) && t.shared[i] {
		chunk := new(arenaChunk)
		*chunk = *t.arena[i]
		t.arena[i] = chunk
		t.shared[i] = false
	}
}

func (t *heapTable) newRef() uint32 {
	if t.freeRefs != 0 {
		ref := t.freeRefs - 1
		t.freeRefs = t.at(ref).size
		return ref
	}
	if t.refs>>chunkBits == uint32(len(t.arena)) {
		t.grow()
	}
	t.refs++
	return t.refs - 1
}

// spareAfter is how many chunks the arena has before the next ones are
// made ahead, on other goroutines.
const spareAfter = 8

// sparesAhead is how many chunks are made ahead. A goroutine the replay
// starts runs on another core only when the decoding there leaves a gap,
// which the time the replay takes to fill one chunk seldom holds: with
// several ahead, each has the time of several chunks to find one (else
// its pages are mapped on the replay's core while the replay waits, as
// they would be without it).
const sparesAhead = 4

// grow adds a chunk to the arena. Mapping a chunk's fresh pages is most
// of the cost of a block in a table that keeps growing: once the arena
// has spareAfter chunks, the next ones are made while the replay fills
// this one, on a core the replay leaves to the decoders.
func (t *heapTable) grow() {
	var chunk *arenaChunk
	if t.spare != nil {
		chunk = <-t.spare
	} else {
		chunk = newChunk()
	}
	t.arena = append(t.arena, chunk)
	if len(t.arena) < spareAfter {
		return
	}
	ahead := 1 // to replace the chunk just taken
	if t.spare == nil {
		t.spare = make(chan *arenaChunk, sparesAhead)
		ahead = sparesAhead
	}
	for range ahead {
		go func(spare chan<- *arenaChunk) { spare <- newChunk() }(t.spare)
	}
}

// newChunk returns a chunk of the arena, its pages mapped.
func newChunk() *arenaChunk {
	chunk := new(arenaChunk)
	pages.Prefault(pages.Bytes(chunk))
	return chunk
}

// share marks every chunk of the arena shared, writing t only if one is
// not yet: the tables of checkpoints are cloned by several goroutines at
// once.
func (t *heapTable) share() { addrmap.MarkShared(&t.shared, len(t.arena)) }

func (t *heapTable) dropRef(ref uint32) {
	lb := t.atw(ref)
	if lb.bits&bitBig != 0 {
		delete(t.big, ref)
	}
	lb.bits, lb.size = 0, t.freeRefs
	t.freeRefs = ref + 1
}

// free ends the block live at addr, with handle h of trace block blk (h
// 0: the trace does not name it by handle), freed by a call from
// freeStack, and returns it, valid until the next take or free. If none
// is live there, it returns false: lookup tells what it remembers of the
// address.
func (t *heapTable) free(addr uint64, h, blk uint32, freeStack uint64) (b *block, live bool) {
	if b, live = t.take(addr, h, blk); live {
		t.remember(addr, b, freeStack)
	}
	return b, live
}

// take ends the block live at addr as free does, but does not remember
// it as freed: a lost free.
func (t *heapTable) take(addr uint64, h, blk uint32) (*block, bool) {
	t.enter(blk)
	var ref uint32
	// Handle 0 has no entry that is set (put keeps no block under it).
	// A handle whose entry names another address or a block not live
	// is not the block's (a damaged trace): the handle keeps its block,
	// so that it goes into the index in time.
	if c, e := t.handles.lookup(h); e != nil && e.ref1 != 0 && e.addr == addr && t.at(e.ref1-1).bits&bitLive != 0 {
		ref = e.ref1 - 1
		e.ref1, e.addr = 0, 0
		c.used--
	} else {
		// A block found in the index leaves it at once: one walk to
		// its page and rank, not two.
		var found bool
		if ref, found = t.indexNow().Remove(addr); !found {
			return nil, false
		}
	}
	t.release(&t.taken, ref)
	return &t.taken, true
}

// release writes the block at ref to b, as unpackTo does, and gives its
// ref back: take's two steps in one walk to the block.
func (t *heapTable) release(b *block, ref uint32) {
	lb := t.atw(ref)
	if lb.bits&bitBig != 0 {
		*b = t.big[ref]
		delete(t.big, ref)
	} else {
		lb.unpackTo(b)
	}
	lb.bits, lb.size = 0, t.freeRefs
	t.freeRefs = ref + 1
}

// remember puts a free of the block b at addr, from freeStack, in the
// ring, over the oldest once it is full.
func (t *heapTable) remember(addr uint64, b *block, freeStack uint64) {
	var f *freedAt
	if len(t.ring) < maxFreed {
		t.ring = append(t.ring, freedAt{})
		f = &t.ring[len(t.ring)-1]
	} else {
		f = &t.ring[t.next]
	}
	// Field by field: see unpackTo.
	f.addr, f.size, f.freeStack, f.site, f.api = addr, b.size, freeStack, b.site, b.api
	t.next = (t.next + 1) & (maxFreed - 1)
	switch {
	case t.seen.bits == nil:
	case t.next == 0:
		// The ring went round: the filter forgets the addresses it
		// dropped, and learns the others again.
		t.seen.reset(t.ring)
	default:
		t.seen.add(addr)
	}
}

// lookup returns the latest free of addr the ring holds. The latest free
// of an address that is not live came after its latest allocation: a
// second free of it is a double free.
func (t *heapTable) lookup(addr uint64) (freedBlock, bool) {
	if t.seen.bits == nil {
		t.seen.reset(t.ring)
	}
	if !t.seen.mayHave(addr) {
		return freedBlock{}, false
	}
	n := len(t.ring)
	for i := 1; i <= n; i++ {
		j := (t.next - i + n) % n
		if t.ring[j].addr == addr {
			return t.ring[j].freedBlock, true
		}
	}
	return freedBlock{}, false
}

// liveAt returns the block live at addr, if there is one, found by
// address whatever its trace block.
func (t *heapTable) liveAt(addr uint64) (block, bool) {
	t.enter(0) // the blocks of the current trace block go into the index
	ref, ok := t.indexNow().Find(addr)
	if !ok {
		return block{}, false
	}
	return t.unpack(ref), true
}

// each calls f for every live block, in no particular order. The block
// is valid until f returns: one is unpacked into for all, for a block
// passed by value through two calls was most of the cost of going over
// millions.
func (t *heapTable) each(f func(addr uint64, b *block)) {
	t.indexNow()
	t.eachOf(0, 1, f)
}

// eachOf calls f as each does, for part part (from 0) of t's blocks cut
// into parts parts. Once the flight has landed (indexNow), the parts may
// be gone over at once, by goroutines of their own, while nothing
// changes t.
func (t *heapTable) eachOf(part, parts int, f func(addr uint64, b *block)) {
	var b block
	t.eachRefOf(part, parts, func(addr uint64, ref uint32) {
		t.unpackTo(&b, ref)
		f(addr, &b)
	})
}

// eachRefOf is eachOf giving each block's ref, for f to read only what it
// needs of the block (see sizeAt): unpacking all of each was most of the
// cost of counting a big heap at its end.
func (t *heapTable) eachRefOf(part, parts int, f func(addr uint64, ref uint32)) {
	if t.index != nil {
		t.index.EachOf(part, parts, f)
	}
	if part != 0 {
		return
	}
	t.handles.each(func(r uint32, addr uint64) {
		if t.at(r-1).bits&bitLive != 0 {
			f(addr, r-1)
		}
	})
	for _, s := range t.strays {
		if t.at(s.ref).bits&bitLive != 0 {
			f(s.addr, s.ref)
		}
	}
}

// sizeAt returns the size, birth and site of the live block at ref: the
// fields of a block that its count at the end reads (keptPart.take).
func (t *heapTable) sizeAt(ref uint32) (size, born uint64, site int32) {
	lb := t.at(ref)
	if lb.bits&bitBig != 0 {
		b := t.big[ref]
		return b.size, b.born, b.site
	}
	return uint64(lb.size), lb.born, lb.site
}

// update calls f on every live block, which it may change.
func (t *heapTable) update(f func(*block)) {
	t.settle() // the blocks the flight replaced are not live
	for c := range t.arena {
		t.own(c)
		chunk := t.arena[c]
		for i := range chunk {
			if lb := &chunk[i]; lb.bits&bitLive != 0 {
				ref := uint32(c<<chunkBits | i)
				b := t.unpack(ref)
				f(&b)
				t.pack(ref, &b, bitLive)
			}
		}
	}
}

// clone returns a copy of t, with every block in the address index: a
// fork child names its blocks by address (the handles of its events are
// its own).
//
// The copy shares the chunks of the arena and of the index with t until
// either writes to one (copy on write): a window of python3 replayed from
// a checkpoint changes a few of the chunks of its million live blocks,
// and copying them all cost more than the replay.
func (t *heapTable) clone() heapTable {
	idx := t.indexNow()
	t.share()
	c := *t
	c.arena, c.shared = slices.Clone(t.arena), slices.Clone(t.shared)
	c.big = maps.Clone(t.big)
	c.index = new(addrmap.Map)
	*c.index = idx.Clone()
	c.strays = slices.Clone(t.strays)
	c.highs = t.highs.clone()
	// The blocks of the handle table go into the copy's index; the
	// table itself stays t's.
	c.handles, c.drained = handleTable{}, handleTable{}
	c.entering = new(entering) // t's buffers stay t's: clones are made at once
	c.spare = nil              // and so does its next chunk
	for _, h := range t.handles.chunks {
		if h.used == 0 {
			continue
		}
		for _, e := range h.entries {
			if e.ref1 != 0 {
				c.entering.addrs = append(c.entering.addrs, e.addr)
				c.entering.refs = append(c.entering.refs, e.ref1-1)
			}
		}
	}
	c.entering.olds = c.index.PutAll(c.entering.addrs, c.entering.refs, nil)
	c.entering.addrs, c.entering.refs = c.entering.addrs[:0], c.entering.refs[:0]
	c.settleOlds(c.entering)
	c.inBlock = 0
	c.ring = append([]freedAt(nil), t.ring...)
	c.seen = t.seen.clone()
	// The copy may be a checkpoint's, which clones of its own must not
	// write to (enter wrote some chunks of its own).
	c.share()
	c.index.Share()
	return c
}

// bloom is a Bloom filter of addresses, with two hashes into 2^21 bits:
// for the 65,536 addresses of the ring, one address in 270 not there
// seems to be.
type bloom struct{ bits []uint64 }

const bloomBits = 1 << 21

func bloomHashes(addr uint64) (uint64, uint64) {
	h := addr * 0x9e3779b97f4a7c15
	return h >> 43, (h >> 21) & (bloomBits - 1)
}

func (f *bloom) add(addr uint64) {
	a, b := bloomHashes(addr)
	f.bits[a/64] |= 1 << (a % 64)
	f.bits[b/64] |= 1 << (b % 64)
}

func (f *bloom) mayHave(addr uint64) bool {
	a, b := bloomHashes(addr)
	return f.bits[a/64]&(1<<(a%64)) != 0 && f.bits[b/64]&(1<<(b%64)) != 0
}

// reset makes the filter hold exactly the addresses of ring.
func (f *bloom) reset(ring []freedAt) {
	if f.bits == nil {
		f.bits = make([]uint64, bloomBits/64)
	}
	clear(f.bits)
	for i := range ring {
		f.add(ring[i].addr)
	}
}

func (f *bloom) clone() bloom { return bloom{bits: slices.Clone(f.bits)} }

// heldBytes returns about how many bytes t holds that counted does not
// have yet, and adds them to it: the chunks of its arena and the runs of
// its index that clones share count once over all of them.
func (t *heapTable) heldBytes(counted map[unsafe.Pointer]bool) uint64 {
	idx := t.indexNow()
	n := uint64(len(t.handles.chunks)+len(t.drained.chunks))*uint64(unsafe.Sizeof(handleChunk{})) +
		uint64(cap(t.ring))*uint64(unsafe.Sizeof(freedAt{})) +
		uint64(len(t.seen.bits))*8 + uint64(len(t.big))*uint64(unsafe.Sizeof(block{})+8) +
		uint64(cap(t.strays))*uint64(unsafe.Sizeof(stray{}))
	if e := t.entering; e != nil {
		n += uint64(cap(e.addrs))*8 + uint64(cap(e.refs)+cap(e.olds))*4
	}
	for _, chunk := range t.arena {
		key := unsafe.Pointer(chunk)
		if !counted[key] {
			counted[key] = true
			n += uint64(unsafe.Sizeof(*chunk))
		}
	}
	return n + idx.HeldBytes(counted)
}

// handleTable holds the ref + 1 (0: none) and the address of the block of
// each handle of a trace block. It grows by chunks, as the handles of the
// trace blocks go higher, so that a trace block of millions of
// allocations costs no copies of what it holds already.
type handleTable struct {
	chunks []*handleChunk
}

const handleChunkBits = 14

// handleChunk holds the blocks of 1<<handleChunkBits handles, each ref
// beside its address: a free by handle reads one cache line of it.
type handleChunk struct {
	entries [1 << handleChunkBits]handleEntry
	used    int // how many of entries have a ref
}

type handleEntry struct {
	addr uint64
	ref1 uint32
}

// lookup returns the entry of handle h and its chunk, or nil if no chunk
// has it. Whoever sets or clears the entry's ref1 keeps the chunk's used
// count.
func (ht *handleTable) lookup(h uint32) (*handleChunk, *handleEntry) {
	i := int(h >> handleChunkBits)
	if i >= len(ht.chunks) {
		return nil, nil
	}
	c := ht.chunks[i]
	return c, &c.entries[h&(1<<handleChunkBits-1)]
}

// grow returns the entry of handle h and its chunk, adding chunks up to
// it.
func (ht *handleTable) grow(h uint32) (*handleChunk, *handleEntry) {
	i := int(h >> handleChunkBits)
	for i >= len(ht.chunks) {
		c := new(handleChunk)
		// put reads an entry before it writes it: mapped ahead, a
		// fresh chunk's pages are not first the zero page.
		pages.Prefault(pages.Bytes(c))
		ht.chunks = append(ht.chunks, c)
	}
	c := ht.chunks[i]
	return c, &c.entries[h&(1<<handleChunkBits-1)]
}

// len returns how many handles have a block.
func (ht *handleTable) len() int {
	n := 0
	for _, c := range ht.chunks {
		n += c.used
	}
	return n
}

// each calls f with the ref + 1 and address of every handle that has one.
func (ht *handleTable) each(f func(ref1 uint32, addr uint64)) {
	for _, c := range ht.chunks {
		if c.used == 0 {
			continue
		}
		for i := range c.entries {
			if e := &c.entries[i]; e.ref1 != 0 {
				f(e.ref1, e.addr)
			}
		}
	}
}
