package trace

import "math/bits"

// addrTable says, for the Writer, which handle names each live address of
// a process. Every free looks its address up and every alloc adds one, so
// it is on the hot path of recording.
//
// It is indexed by address rather than by hash: allocators place the
// blocks they carve one after the other, and a program frees mostly what
// it allocated lately, so consecutive events hit the same few pages of
// address space. A hash table scatters them: with the hundreds of
// thousands of live blocks of python3 or jq, it grew to tens of MiB and
// every insert missed the cache (10–16% of the CPU time of a recording).
// Here a page of 4 KiB of address space holds the handles of the 256
// blocks that may start in it 16-byte aligned, as glibc's do, in one KiB:
// the events of a run of fresh blocks, and frees in the order of
// allocation, touch the same cache lines. Recording python3 building and
// dumping a JSON of 200k dicts takes ~30% less CPU than with the hash
// table, and BenchmarkAddrTable/heap-fifo is ~20% faster. Where the frees
// are of random blocks among 512k (heap-random) it is ~25% slower: a free
// misses the cache either way, and here it also reads its chunk (below).
//
// Memory: a page costs 1 KiB for 4 KiB of address space, against 64 bytes
// per live block for a hash table a quarter full, so it wins when pages
// hold more than 16 live blocks, as pages of small blocks do; pages with
// a single live block cost at most a quarter of the memory that block's
// page spans in the traced program, which is live anyway. Smaller pages
// would waste less around big blocks but make the directory bigger and
// the runs of fresh blocks cross more pages. Pages whose blocks are all
// freed go back to a free list, so the table holds as many pages as there
// are pages with live blocks, not as many as a block of the trace went
// through.
//
// Addresses that are not 16-byte aligned (other allocators, aligned_alloc
// of odd alignments into a bigger chunk) go to a plain hash table.
type addrTable struct {
	pages    []addrPage // the first npages are in this generation, live or free
	pageLive []uint16   // by page index: how many of its nums are not 0
	npages   int
	free     []uint32 // indices of emptied pages, all zero

	chunks    []addrChunk // the first nchunks are in this generation
	nchunks   int
	freeChunk []uint32 // indices of emptied chunks, all zero
	dir       addrHash // chunk number → index in chunks

	odd  addrHash // addresses that are not aligned to addrAlign
	used int      // live addresses, in pages and odd

	// cache holds the page numbers plus 1 (0: none, so that the zero
	// table is empty) and the indices of the last two pages looked up,
	// the latest first: allocations go mostly to one page, frees mostly
	// to another, and both seldom leave it for a while.
	cacheKey [2]uint64
	cacheIdx [2]uint32
	// recentPages holds more pages looked up lately, by the low bits of
	// their numbers, in the same form: where frees and reuses go all
	// over a heap of a few hundred pages, as on the malloc-dense loop,
	// most lookups that miss the two above find their page here without
	// hashing.
	recentPages [recentPageSlots]recentPage

	reserved bool // pages and pageLive are in reservations (see reserved)
}

// recentPage is a slot of addrTable.recentPages.
type recentPage struct {
	key uint64 // the page number plus 1; 0 for none
	idx uint32
}

// recentPageSlots is the number of slots of addrTable.recentPages: a power
// of two, for the pages of a heap of a few MiB.
const recentPageSlots = 512

// maxReservedPages is the room the reservation of pages has: 1 GiB of
// address space for 4 GiB of the program's heap with live blocks in one
// block of the trace; past it, pages grow as Go slices do.
const maxReservedPages = 1 << 20

// The address space is cut in pages, and pages in chunks: a chunk says
// where the pages of 2 MiB of address space are in pages, and a hash
// table of chunks finds the chunk of a page. The pages with live blocks
// of a process of a few hundred MiB of heap then have their entries in a
// few hundred KiB of chunks, which the cache keeps, where a hash table of
// pages would scatter them over MiBs.
const (
	pageBits  = 12 // 4 KiB pages of address space
	alignBits = 4  // blocks are 16-byte aligned
	addrAlign = 1 << alignBits
	pageSlots = 1 << (pageBits - alignBits)

	chunkBits  = 9 // pages a chunk, log2
	chunkPages = 1 << chunkBits
)

// listedMark, in a slot of a page, marks an address that is not live but
// was pushed on a class list in this block: listedMark | the index of the
// thread whose list it is. The Writer then looks for a new block's
// address in that list only, and in none if the address has no mark.
// Marks are hints: an address taken out of its list by the allocation of
// a block of another size class keeps its mark, and one pushed twice
// loses it when the older push drops out of the list; the Writer then
// scans for nothing, or misses a depth and writes a step or an escape,
// which decode as well. Handle numbers stay below listedMark: a block of
// the trace holds fewer than 2^31 events.
const listedMark = 1 << 31

// addrPage holds the handles of the blocks that start in a page, by their
// offset in it divided by addrAlign; 0 when no live block starts there.
type addrPage struct{ nums [pageSlots]uint32 }

// addrChunk holds the indices plus 1 of the pages of a chunk in
// addrTable.pages, 0 for pages without live blocks.
type addrChunk struct {
	pages [chunkPages]uint32
	live  uint32 // how many of pages are not 0
}

// lookup returns the index of the page of number key in pages, and false
// if the table has none.
func (t *addrTable) lookup(key uint64) (uint32, bool) {
	if key+1 == t.cacheKey[0] {
		return t.cacheIdx[0], true
	}
	return t.lookupFurther(key)
}

// lookupFurther is lookup past the latest page, which most lookups are
// in: lookup is then small enough to be inlined.
func (t *addrTable) lookupFurther(key uint64) (uint32, bool) {
	if key+1 == t.cacheKey[1] {
		t.cacheKey[0], t.cacheKey[1] = t.cacheKey[1], t.cacheKey[0]
		t.cacheIdx[0], t.cacheIdx[1] = t.cacheIdx[1], t.cacheIdx[0]
		return t.cacheIdx[0], true
	}
	if r := &t.recentPages[key&(recentPageSlots-1)]; r.key == key+1 {
		t.remember(key, r.idx)
		return r.idx, true
	}
	_, s := t.dir.find(key >> chunkBits)
	if s == nil {
		return 0, false
	}
	idx := t.chunks[s.num].pages[key&(chunkPages-1)]
	if idx == 0 {
		return 0, false
	}
	t.remember(key, idx-1)
	return idx - 1, true
}

func (t *addrTable) remember(key uint64, idx uint32) {
	t.cacheKey[1], t.cacheIdx[1] = t.cacheKey[0], t.cacheIdx[0]
	t.cacheKey[0], t.cacheIdx[0] = key+1, idx
	t.recentPages[key&(recentPageSlots-1)] = recentPage{key: key + 1, idx: idx}
}

// place returns the slot of addr, aligned, making its page if it has none,
// for the caller to read its mark and then fill it with a handle; nil if
// addr is not aligned. The slot counts as used from now on.
func (t *addrTable) place(addr uint64) *uint32 {
	if addr&(addrAlign-1) != 0 {
		return nil
	}
	key := addr >> pageBits
	idx := t.cacheIdx[0]
	if key+1 != t.cacheKey[0] { // lookup's first step, not to pay for a call
		var ok bool
		if idx, ok = t.lookupFurther(key); !ok {
			idx = t.newPage(key)
		}
	}
	slot := &t.pages[idx].nums[(addr>>alignBits)&(pageSlots-1)]
	if *slot == 0 {
		t.pageLive[idx]++
		t.used++
	}
	return slot
}

// fill makes num the handle of addr, whose slot place returned.
func (t *addrTable) fill(slot *uint32, addr uint64, num uint32) {
	if slot == nil {
		t.fillOdd(addr, num)
		return
	}
	*slot = num
}

// fillOdd is fill for an address that is not aligned. (It is not
// inlined, so that fill is.)
//
//go:noinline
func (t *addrTable) fillOdd(addr uint64, num uint32) {
	n := t.odd.used
	t.odd.set(addr, num)
	t.used += t.odd.used - n
}

// slotOf returns the slot of addr, aligned, and the index of its page,
// or nil if its page has none.
func (t *addrTable) slotOf(addr uint64) (*uint32, uint32) {
	idx := t.cacheIdx[0]
	if key := addr >> pageBits; key+1 != t.cacheKey[0] { // as in place
		var ok bool
		if idx, ok = t.lookupFurther(key); !ok {
			return nil, 0
		}
	}
	return &t.pages[idx].nums[(addr>>alignBits)&(pageSlots-1)], idx
}

// holds reports whether a live block is at addr.
func (t *addrTable) holds(addr uint64) bool {
	if t.used == 0 {
		return false
	}
	if addr&(addrAlign-1) != 0 {
		_, s := t.odd.find(addr)
		return s != nil
	}
	slot, _ := t.slotOf(addr)
	return holdsLive(slot)
}

// holdsLive reports whether an address slot holds a live block's handle
// (not a mark, not empty).
func holdsLive(slot *uint32) bool { return slot != nil && *slot != 0 && *slot&listedMark == 0 }

// release takes addr out of the table as take does, and returns its
// handle; if the block of that handle has a class, its slot keeps the
// mark of the thread on whose class list the block's address goes.
func (t *addrTable) release(addr uint64, handles []handle) uint32 {
	if t.used == 0 || addr&(addrAlign-1) != 0 {
		return t.take(addr)
	}
	slot, idx := t.slotOf(addr)
	if slot == nil || *slot == 0 || *slot&listedMark != 0 {
		return 0
	}
	num := *slot
	if hd := &handles[num]; hd.class != 0 {
		*slot = listedMark | hd.thread
	} else {
		t.clearSlot(slot, addr, idx)
	}
	return num
}

// unlist removes the mark of addr if it says it is on owner's list.
func (t *addrTable) unlist(addr uint64, owner uint32) {
	if addr&(addrAlign-1) != 0 {
		return
	}
	if slot, idx := t.slotOf(addr); slot != nil && *slot == listedMark|owner {
		t.clearSlot(slot, addr, idx)
	}
}

// take removes addr from the table and returns its handle, or 0 if addr
// is not live in the table.
func (t *addrTable) take(addr uint64) uint32 {
	if t.used == 0 {
		return 0
	}
	if addr&(addrAlign-1) != 0 {
		i, s := t.odd.find(addr)
		if s == nil {
			return 0
		}
		num := s.num
		t.odd.remove(i)
		t.used--
		return num
	}
	slot, idx := t.slotOf(addr)
	if slot == nil || *slot == 0 || *slot&listedMark != 0 {
		return 0
	}
	num := *slot
	t.clearSlot(slot, addr, idx)
	return num
}

// clearSlot zeroes slot, which is not 0, of addr in the page at idx, and
// frees the page if it was its last one that was not.
func (t *addrTable) clearSlot(slot *uint32, addr uint64, idx uint32) {
	*slot = 0
	t.used--
	if t.pageLive[idx]--; t.pageLive[idx] == 0 {
		t.freePage(addr>>pageBits, idx)
	}
}

// set makes num, which is not 0, the handle of addr, whether addr had one
// or not. (A block whose free was lost is allocated again while its handle
// is live: the latest handle is the one the next free of the address
// releases.)
func (t *addrTable) set(addr uint64, num uint32) { t.fill(t.place(addr), addr, num) }

// newPage gives page key an empty page and returns its index: the latest
// one emptied if any, as it is the likeliest to be in the cache, else one
// from before the table was last emptied, else a new one.
func (t *addrTable) newPage(key uint64) uint32 {
	var idx uint32
	if n := len(t.free); n > 0 {
		idx = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		if t.npages < len(t.pages) {
			clear(t.pages[t.npages].nums[:])
		} else {
			if full(t.pages, t.reserved) {
				t.reserved = true
				t.pages = reserved(t.pages, maxReservedPages, t)
				t.pageLive = reserved(t.pageLive, maxReservedPages, t)
			}
			t.pages = append(t.pages, addrPage{})
			t.pageLive = append(t.pageLive, 0)
		}
		idx = uint32(t.npages)
		t.npages++
	}
	t.pageLive[idx] = 0
	c := &t.chunks[t.chunk(key>>chunkBits)]
	c.pages[key&(chunkPages-1)] = idx + 1
	c.live++
	t.remember(key, idx)
	return idx
}

// chunk returns the index of chunk number key in chunks, giving it one if
// it has none, as newPage does for pages.
func (t *addrTable) chunk(key uint64) uint32 {
	if _, s := t.dir.find(key); s != nil {
		return s.num
	}
	var idx uint32
	if n := len(t.freeChunk); n > 0 {
		idx = t.freeChunk[n-1]
		t.freeChunk = t.freeChunk[:n-1]
	} else {
		if t.nchunks < len(t.chunks) {
			t.chunks[t.nchunks] = addrChunk{}
		} else {
			t.chunks = append(t.chunks, addrChunk{})
		}
		idx = uint32(t.nchunks)
		t.nchunks++
	}
	t.dir.set(key, idx)
	return idx
}

// freePage forgets page key, at idx, whose last block was taken: its slots
// are all 0, so it is ready for another page. So is its chunk once it has
// no pages left.
func (t *addrTable) freePage(key uint64, idx uint32) {
	t.free = append(t.free, idx)
	for c := range t.cacheKey {
		if t.cacheKey[c] == key+1 {
			t.cacheKey[c] = 0
		}
	}
	if r := &t.recentPages[key&(recentPageSlots-1)]; r.key == key+1 {
		r.key = 0
	}
	i, s := t.dir.find(key >> chunkBits)
	c := &t.chunks[s.num]
	c.pages[key&(chunkPages-1)] = 0
	if c.live--; c.live == 0 {
		t.freeChunk = append(t.freeChunk, s.num)
		t.dir.remove(i)
	}
}

// reset empties the table, keeping its memory: the pages and chunks in
// use are cleared when they are handed out again.
func (t *addrTable) reset() {
	t.npages, t.nchunks = 0, 0
	t.free, t.freeChunk = t.free[:0], t.freeChunk[:0]
	t.dir.reset()
	t.odd.reset()
	t.used = 0
	t.cacheKey = [2]uint64{}
	clear(t.recentPages[:])
}

// addrHash maps addresses (or page numbers) to 32-bit numbers: an
// open-addressing table with linear probing, kept at most a quarter full,
// which does that in less than half the time a Go map takes
// (BenchmarkAddrTable/map).
type addrHash struct {
	slots []addrSlot // a power of two of them
	used  int
	shift uint   // 64 - log2(len(slots))
	gen   uint16 // the generation of the slots in use; the others are empty
}

// addrSlot is a slot of an addrHash. Emptying the table makes a new
// generation rather than clearing every slot: the table of a process that
// once had many live blocks stays big, and it is emptied with every block.
type addrSlot struct {
	addr uint64
	num  uint32
	gen  uint16
}

const minAddrSlots = 1 << 6

// home returns the slot where the probe for addr starts. Fibonacci hashing
// spreads addresses that differ only in a few middle bits, as heap
// addresses do.
func (t *addrHash) home(addr uint64) int {
	return int((addr * 0x9e3779b97f4a7c15) >> t.shift)
}

// find returns the index of the slot of addr and the slot, or -1 and nil
// if addr is not in the table. They are good until the next insert or
// remove.
func (t *addrHash) find(addr uint64) (int, *addrSlot) {
	if t.used == 0 {
		return -1, nil
	}
	mask := len(t.slots) - 1
	for i := t.home(addr); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.gen != t.gen {
			return -1, nil
		}
		if s.addr == addr {
			return i, s
		}
	}
}

// set makes num the number of addr, whether addr had one or not.
func (t *addrHash) set(addr uint64, num uint32) {
	if t.used >= len(t.slots)/4 {
		t.grow()
	}
	mask := len(t.slots) - 1
	for i := t.home(addr); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.gen != t.gen {
			*s = addrSlot{addr: addr, num: num, gen: t.gen}
			t.used++
			return
		}
		if s.addr == addr {
			s.num = num
			return
		}
	}
}

// remove empties slot i without leaving a tombstone: every later slot of
// its run whose probe would have passed through i moves back into the
// hole, which then moves on to where that slot was (backward-shift
// deletion).
func (t *addrHash) remove(i int) {
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.slots[j].gen == t.gen; j = (j + 1) & mask {
		// The entry at j may fill the hole at i unless its home lies
		// cyclically in (i, j]: its probe would not reach i.
		if (j-t.home(t.slots[j].addr))&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i].gen = t.gen - 1
	t.used--
}

func (t *addrHash) grow() {
	old, oldGen := t.slots, t.gen
	n := max(minAddrSlots, 2*len(old))
	t.slots = make([]addrSlot, n)
	t.shift = uint(64 - bits.TrailingZeros(uint(n)))
	t.gen, t.used = 1, 0
	for _, s := range old {
		if s.gen == oldGen {
			t.set(s.addr, s.num)
		}
	}
}

// reset empties the table, keeping its memory.
func (t *addrHash) reset() {
	if t.used == 0 {
		return
	}
	t.used = 0
	t.gen++
	if t.gen == 0 { // slots of generation 0 may be left from long ago
		clear(t.slots)
		t.gen = 1
	}
}
