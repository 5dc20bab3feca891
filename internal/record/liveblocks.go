package record

import (
	"maps"
	"math/bits"
	"slices"
)

// blockTable is a set of blocks, address to size, laid out by address so
// that it costs a few bytes a block and finds any address's block in a
// constant number of steps (the leak scan looks up every word it reads).
//
// A 4 KiB page of address space with blocks starting in it has a bitmap
// of the 8-byte slots where one starts (so 8-byte aligned blocks, as
// allocators other than glibc's give, fit as well as 16-byte ones) and the
// sizes of its blocks packed in address order: a block's rank among the
// page's set bits is its place in sizes. An insert shifts the sizes after
// it in its page, a few dozen bytes. A delete leaves its place in sizes,
// marked dead, to a block put back at the same address (allocators hand
// out a freed block again) or to the page's compaction, once half of its
// places and at least minDead are dead, when a full page is to take
// another block, or when a leak scan is to number the blocks: frees in runs
// of addresses would otherwise shift the rest of a page at each one.
// Sizes are 16-bit; bigger ones are in a map, as are the rare blocks at
// addresses not 8-byte aligned. Pages are found through a directory of 2
// MiB chunks of address space, or the two found last: allocators carve
// blocks one after the other and programs free in runs.
// (internal/addrmap, the analysis's index, has the same layout with
// 32-bit values; one home for both is still to be made.)
type blockTable struct {
	runs      [][]tablePage // pages, in runs of 1<<pageRunBits so that adding one copies none
	npages    uint32
	freePages []uint32
	dir       map[uint64]*tableChunk // chunk number → its pages
	big       map[uint64]uint64      // sizes of bigBlock bytes and more, by address
	odd       map[uint64]uint64      // blocks at addresses not 8-byte aligned
	n         int

	// carved is the address of the latest block put after every other
	// block of its page: no block starts after it in that page, so the
	// next block an allocator carves there goes at the end of its page's
	// sizes, with no rank to count (see put).
	carved uint64

	lastKey [2]uint64               // page number + 1 of the pages found last (0: none), the latest first
	lastPg  [2]*tablePage           // and the pages themselves: runs never move
	near    [nearChunks]*tableChunk // a cache of dir, at the chunk number's low bits
}

const (
	tablePageBits  = 12
	tableSlotBits  = 3 // 8-byte slots
	tablePageSlots = 1 << (tablePageBits - tableSlotBits)
	tableChunkBits = 9 // 512 pages, 2 MiB of address space a chunk
	pageRunBits    = 8
	nearChunks     = 64

	// bigBlock marks, in a page's sizes, a block whose size is in big;
	// deadBlock a place whose block was removed.
	bigBlock  = 1<<16 - 1
	deadBlock = bigBlock - 1

	// minDead is how many dead places a page keeps before remove compacts
	// it. A page of a few blocks that a program allocates in and frees
	// again (jq, python3: short-lived blocks) would otherwise be compacted
	// at nearly every free, a walk of the whole page each time (jq: a
	// compaction every other free, 40% of the live set's instructions);
	// kept, a dead place takes the next block put at its address without
	// a shift. It costs at most 2 bytes a place, a few places a page.
	minDead = 8
)

type tablePage struct {
	key    uint64                      // page number + 1; 0 for a page on the free list
	starts [tablePageSlots / 64]uint64 // the places in sizes, dead ones too
	// before counts the places in the words of starts before each, 16
	// bits a word of starts (lane i of before[j] for word 4j+i): an
	// insert adds to the counts of the words after its own with two
	// additions, not a loop.
	before [tablePageSlots / 64 / 4]uint64
	sizes  []uint16
	dead   uint16 // how many of sizes are deadBlock
	shared bool   // sizes may be another table's too (see clone)
}

type tableChunk struct {
	key   uint64 // chunk number
	pages [1 << tableChunkBits]uint32
	live  uint32 // how many of pages are set
}

func (t *blockTable) len() int { return t.n }

// at returns page p.
func (t *blockTable) at(p uint32) *tablePage {
	return &t.runs[p>>pageRunBits][p&(1<<pageRunBits-1)]
}

// findPage returns the page of number key, and false if no block starts
// in it, for a key other than lastKey[0]: the live set's updates, at
// every event, check that one first, without a call.
func (t *blockTable) findPage(key uint64) (*tablePage, bool) {
	if key+1 == t.lastKey[1] {
		t.lastKey[0], t.lastKey[1] = t.lastKey[1], t.lastKey[0]
		t.lastPg[0], t.lastPg[1] = t.lastPg[1], t.lastPg[0]
		return t.lastPg[0], true
	}
	c := t.chunk(key >> tableChunkBits)
	if c == nil {
		return nil, false
	}
	p := c.pages[key&(1<<tableChunkBits-1)]
	if p == 0 {
		return nil, false
	}
	pg := t.at(p - 1)
	t.lastKey[1], t.lastPg[1] = t.lastKey[0], t.lastPg[0]
	t.lastKey[0], t.lastPg[0] = key+1, pg
	return pg, true
}

func (t *blockTable) chunk(ck uint64) *tableChunk {
	n := &t.near[ck%nearChunks]
	if *n != nil && (*n).key == ck {
		return *n
	}
	c := t.dir[ck]
	if c != nil {
		*n = c
	}
	return c
}

func (t *blockTable) newPage(key uint64) *tablePage {
	ck := key >> tableChunkBits
	c := t.chunk(ck)
	if c == nil {
		if t.dir == nil {
			t.dir = make(map[uint64]*tableChunk)
		}
		c = &tableChunk{key: ck}
		t.dir[ck] = c
		t.near[ck%nearChunks] = c
	}
	var p uint32
	if n := len(t.freePages); n > 0 {
		p, t.freePages = t.freePages[n-1], t.freePages[:n-1]
	} else {
		if t.npages&(1<<pageRunBits-1) == 0 {
			t.runs = append(t.runs, make([]tablePage, 1<<pageRunBits))
		}
		p = t.npages
		t.npages++
	}
	pg := t.at(p)
	*pg = tablePage{key: key + 1}
	c.pages[key&(1<<tableChunkBits-1)] = p + 1
	c.live++
	t.lastKey[1], t.lastPg[1] = t.lastKey[0], t.lastPg[0]
	t.lastKey[0], t.lastPg[0] = key+1, pg
	return pg
}

func (t *blockTable) freePage(key uint64) {
	ck := key >> tableChunkBits
	c := t.chunk(ck)
	p := c.pages[key&(1<<tableChunkBits-1)] - 1
	*t.at(p) = tablePage{}
	t.freePages = append(t.freePages, p)
	c.pages[key&(1<<tableChunkBits-1)] = 0
	if c.live--; c.live == 0 {
		delete(t.dir, ck)
		t.near[ck%nearChunks] = nil
	}
	t.lastKey, t.lastPg = [2]uint64{}, [2]*tablePage{}
}

func slotIn(addr uint64) uint { return uint(addr>>tableSlotBits) & (tablePageSlots - 1) }

// rank returns how many blocks of pg start before slot s.
func (pg *tablePage) rank(s uint) int {
	w := s / 64 % (tablePageSlots / 64)
	return int(uint16(pg.before[w>>2]>>((w&3)<<4))) + bits.OnesCount64(pg.starts[w]&(1<<(s%64)-1))
}

// afterWord holds, for each word of starts, the lanes of before of the
// words after it set to 1.
var afterWord = func() (a [tablePageSlots / 64][2]uint64) {
	for w := range a {
		for after := w + 1; after < len(a); after++ {
			a[w][after/4] |= 1 << (16 * (after % 4))
		}
	}
	return a
}()

// counted adds a block that starts in slot s to the counts of the words
// after its own.
func (pg *tablePage) counted(s uint) {
	add := &afterWord[s/64%(tablePageSlots/64)]
	pg.before[0] += add[0]
	pg.before[1] += add[1]
}

func (pg *tablePage) has(s uint) bool { return pg.starts[s/64]&(1<<(s%64)) != 0 }

// startsAt reports whether a block starts at addr, an address in pg: most
// pointers the leak scan finds point at a block's start, which the start
// bit alone answers.
func (pg *tablePage) startsAt(addr uint64) bool {
	return addr&(1<<tableSlotBits-1) == 0 && pg.has(slotIn(addr))
}

// own makes pg's sizes its own, if they may be shared.
func (pg *tablePage) own() {
	if pg.shared {
		pg.sizes = slices.Clone(pg.sizes)
		pg.shared = false
	}
}

// put makes size the size of the block at addr, and returns the size it
// had, if it had one.
//
// A block an allocator carves after the latest one carved, in the page
// found last, goes at the end of its page's sizes: that takes no rank and
// no check for a place already there.
func (t *blockTable) put(addr, size uint64) (old uint64, existed bool) {
	if addr > t.carved && addr^t.carved < 1<<tablePageBits && addr>>tablePageBits+1 == t.lastKey[0] &&
		addr&(1<<tableSlotBits-1) == 0 && size < deadBlock {
		pg := t.lastPg[0]
		if len(pg.sizes) < cap(pg.sizes) && !pg.shared {
			s := slotIn(addr)
			pg.starts[s/64] |= 1 << (s % 64)
			pg.counted(s)
			pg.sizes = append(pg.sizes, uint16(size))
			t.n++
			t.carved = addr
			return 0, false
		}
	}
	if addr&(1<<tableSlotBits-1) != 0 {
		if t.odd == nil {
			t.odd = make(map[uint64]uint64)
		}
		old, existed = t.odd[addr]
		t.odd[addr] = size
		if !existed {
			t.n++
		}
		return old, existed
	}
	key := addr >> tablePageBits
	pg := t.lastPg[0]
	if key+1 != t.lastKey[0] {
		var ok bool
		if pg, ok = t.findPage(key); !ok {
			pg = t.newPage(key)
		}
	}
	s := slotIn(addr)
	pg.own()
	r := pg.rank(s)
	small := uint16(bigBlock)
	if size < deadBlock {
		small = uint16(size)
	}
	if pg.has(s) {
		switch pg.sizes[r] {
		case deadBlock:
			pg.dead--
			t.n++
		case bigBlock:
			old, existed = t.big[addr], true
			delete(t.big, addr)
		default:
			old, existed = uint64(pg.sizes[r]), true
		}
		pg.sizes[r] = small
	} else {
		if len(pg.sizes) == cap(pg.sizes) && pg.dead > 0 {
			// Dead places are what a full page makes room with first
			// (remove leaves up to minDead of them to blocks put back).
			pg.compact()
			r = pg.rank(s)
		}
		pg.starts[s/64] |= 1 << (s % 64)
		pg.counted(s)
		if len(pg.sizes) == cap(pg.sizes) {
			grown := make([]uint16, len(pg.sizes), pg.room(s, r))
			copy(grown, pg.sizes)
			pg.sizes = grown
		}
		if r == len(pg.sizes) { // blocks carved one after the other
			pg.sizes = append(pg.sizes, small)
			t.carved = addr
		} else {
			pg.sizes = slices.Insert(pg.sizes, r, small)
		}
		t.n++
	}
	if small == bigBlock {
		if t.big == nil {
			t.big = make(map[uint64]uint64)
		}
		t.big[addr] = size
	}
	return old, existed
}

// room returns how many sizes pg is to have room for when its sizes are
// full and a block is put in slot s, at rank r. Each growth is a copy, so
// room grows by more than append would from nothing: a page of small
// blocks holds dozens. When a block goes after all the others, as an
// allocator carving the page one block after the other puts them, there
// is room for as many more as the rest of the page holds at the spacing
// of the page's blocks so far: most such pages then grow once or twice
// rather than four times. Up to five times the blocks it has, should the
// blocks so far have been closer than those to come.
func (pg *tablePage) room(s uint, r int) int {
	n := len(pg.sizes)
	room := max(16, 2*n)
	if n < 16 || r != n {
		return room
	}
	first := uint(0) // the slot of the page's first place
	for w, word := range pg.starts {
		if word != 0 {
			first = uint(w*64 + bits.TrailingZeros64(word))
			break
		}
	}
	if s <= first {
		return room
	}
	more := (tablePageSlots - s) * uint(n) / (s - first)
	return max(room, min(n+int(more+more/8)+1, 5*n, tablePageSlots))
}

func (t *blockTable) sizeAt(pg *tablePage, r int, addr uint64) uint64 {
	if s := pg.sizes[r]; s != bigBlock {
		return uint64(s)
	}
	return t.big[addr]
}

// remove takes the block at addr out, and returns its size, if it was in.
func (t *blockTable) remove(addr uint64) (size uint64, existed bool) {
	if addr&(1<<tableSlotBits-1) != 0 {
		if size, existed = t.odd[addr]; existed {
			delete(t.odd, addr)
			t.n--
		}
		return size, existed
	}
	key := addr >> tablePageBits
	pg := t.lastPg[0]
	if key+1 != t.lastKey[0] {
		var ok bool
		if pg, ok = t.findPage(key); !ok {
			return 0, false
		}
	}
	s := slotIn(addr)
	if !pg.has(s) {
		return 0, false
	}
	r := pg.rank(s)
	switch size = uint64(pg.sizes[r]); size {
	case deadBlock:
		return 0, false
	case bigBlock:
		size = t.big[addr]
		delete(t.big, addr)
	}
	t.n--
	if int(pg.dead)+1 == len(pg.sizes) {
		t.freePage(key)
		return size, true
	}
	pg.own()
	pg.sizes[r] = deadBlock
	if pg.dead++; pg.dead >= minDead && int(pg.dead)*2 >= len(pg.sizes) {
		pg.compact()
	}
	return size, true
}

// compact takes the dead places out of pg's sizes.
func (pg *tablePage) compact() {
	if pg.dead == 0 {
		return
	}
	pg.own()
	r, kept := 0, 0
	for w := range pg.starts {
		for word := pg.starts[w]; word != 0; word &= word - 1 {
			if size := pg.sizes[r]; size == deadBlock {
				pg.starts[w] &^= word & -word
			} else {
				pg.sizes[kept] = size
				kept++
			}
			r++
		}
	}
	pg.sizes, pg.dead = pg.sizes[:kept], 0
	var before uint64 // the places in the words before, so far
	for w := range pg.starts {
		lane := uint(w&3) << 4
		pg.before[w>>2] = pg.before[w>>2]&^(0xffff<<lane) | before<<lane
		before += uint64(bits.OnesCount64(pg.starts[w]))
	}
	if cap(pg.sizes) >= 64 && kept < cap(pg.sizes)/4 {
		pg.sizes = slices.Clip(slices.Clone(pg.sizes)) // give back what a page that emptied no longer needs
	}
}

// compact takes the dead places out of every page, so that every place
// in a page's sizes is a block's, as the leak scan numbers them.
func (t *blockTable) compact() {
	for _, run := range t.runs {
		for i := range run {
			if run[i].dead > 0 {
				run[i].compact()
			}
		}
	}
}

// find returns the size of the block that starts at addr, if there is one.
func (t *blockTable) find(addr uint64) (uint64, bool) {
	if t.n == 0 {
		return 0, false
	}
	if addr&(1<<tableSlotBits-1) != 0 {
		size, ok := t.odd[addr]
		return size, ok
	}
	key := addr >> tablePageBits
	pg := t.lastPg[0]
	if key+1 != t.lastKey[0] {
		var ok bool
		if pg, ok = t.findPage(key); !ok {
			return 0, false
		}
	}
	s := slotIn(addr)
	if !pg.has(s) {
		return 0, false
	}
	r := pg.rank(s)
	if pg.sizes[r] == deadBlock {
		return 0, false
	}
	return t.sizeAt(pg, r, addr), true
}

// clone returns a copy of t. The pages' sizes are shared until either
// side changes a page: a fork child's heap is its parent's, and most of
// it is never freed in the child.
func (t *blockTable) clone() *blockTable {
	c := &blockTable{npages: t.npages, n: t.n}
	c.freePages = slices.Clone(t.freePages)
	c.big, c.odd = maps.Clone(t.big), maps.Clone(t.odd)
	for _, run := range t.runs {
		for i := range run {
			run[i].shared = run[i].sizes != nil
		}
		c.runs = append(c.runs, slices.Clone(run))
	}
	if t.dir != nil {
		c.dir = make(map[uint64]*tableChunk, len(t.dir))
		for k, ch := range t.dir {
			cc := *ch
			c.dir[k] = &cc
		}
	}
	return c
}

// sortedPages returns the indexes of the pages with blocks, in increasing
// order of address.
func (t *blockTable) sortedPages() []uint32 {
	chunks := slices.Sorted(maps.Keys(t.dir))
	out := make([]uint32, 0, t.npages-uint32(len(t.freePages)))
	for _, ck := range chunks {
		for _, p := range t.dir[ck].pages {
			if p != 0 {
				out = append(out, p-1)
			}
		}
	}
	return out
}

// eachInPage calls f with the address and size of each block of page p,
// in increasing order, and its rank in the page.
func (t *blockTable) eachInPage(p uint32, f func(rank int, addr, size uint64)) {
	pg := t.at(p)
	base := (pg.key - 1) << tablePageBits
	r := 0
	for w, word := range pg.starts {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			word &= word - 1
			addr := base + uint64(w*64+b)<<tableSlotBits
			f(r, addr, t.sizeAt(pg, r, addr))
			r++
		}
	}
}

// each calls f with each block, in increasing order of address.
func (t *blockTable) each(f func(addr, size uint64)) {
	t.compact()
	odd := slices.Sorted(maps.Keys(t.odd))
	for _, p := range t.sortedPages() {
		t.eachInPage(p, func(_ int, addr, size uint64) {
			for len(odd) > 0 && odd[0] < addr {
				f(odd[0], t.odd[odd[0]])
				odd = odd[1:]
			}
			f(addr, size)
		})
	}
	for _, a := range odd {
		f(a, t.odd[a])
	}
}
