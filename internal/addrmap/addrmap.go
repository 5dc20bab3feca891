// Package addrmap maps the addresses of heap blocks to 32-bit values.
//
// The analysis's heap table keeps its blocks' places in one (an
// allocation looks its address up unless it is above every block of its 2
// MiB in the map, and so does every free the trace does not name by
// handle). The recorder's table of
// live blocks (record's blockTable) is laid out the same way, with 16-bit
// sizes and the numbering its leak scan needs: one layout in two places,
// to be made one.
//
// It is indexed by address, not by hash: a 4 KiB page of address space
// has a bitmap of the 512 places where a block may start, 8-byte aligned,
// and the values of the blocks that do start there, in address order.
// Allocators carve blocks one after the other and programs free in runs,
// so consecutive events touch one page: a hash table spread python3's two
// million long-lived blocks over 64 MiB that every insert and lookup
// missed in the cache, and grew by rehashing all of them. A page is found
// through a directory of 2 MiB chunks of address space, or the one found
// last.
//
// A page costs 88 bytes and 4 bytes (and the slack of its slice) a block
// that starts in it: a heap of small blocks costs about 6 bytes a block,
// where a value for each possible start cost 16. Emptied pages and chunks
// are given out again, so the map holds as many as there are with live
// blocks. Addresses that are not 8-byte aligned go to a Go map. (The
// trace Writer's addrTable is laid out by address for the same reason; it
// also marks listed addresses and empties itself every trace block, in
// memory outside the Go heap.)
package addrmap

import (
	"maps"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/memtrail/memtrail/internal/pages"
)

// Map is a map from addresses to values. The zero Map is empty and ready.
type Map struct {
	// pages are in runs of 1<<pageRunBits, so that adding one copies none.
	pages      [][]indexPage
	shared     []bool // by run: the run may be another map's too (see Clone)
	npages     uint32
	freePages  []uint32
	chunks     []indexChunk
	freeChunks []uint32
	dir        map[uint64]uint32 // chunk number → index in chunks
	odd        map[uint64]uint32 // addresses not aligned to 8 bytes → value
	n          int               // blocks indexed
	lastFill   int               // how many values the page inserted into last has

	// lastKey holds the page numbers + 1 (0: none) of the two pages
	// found last, the latest first, and lastIdx their indexes: the
	// allocations of a program go mostly to one page, its frees to
	// another.
	lastKey [2]uint64
	lastIdx [2]uint32
	// near caches dir: the chunk number + 1 (0: none) and index of a
	// chunk, at the chunk number's low bits. A map lookup would cost more
	// than the rest of a lookup in the index.
	near [nearChunks]struct {
		key uint64
		idx uint32
	}
	// removed is where the latest Remove took a block out: its page's
	// number + 1 (0: none, or the page has changed since in another way)
	// and the block's slot and rank. A program that frees in address
	// order frees next a block a few slots above in the same page, whose
	// rank is that one's plus the blocks between: a word or two to count
	// rather than the page up to it.
	removed struct {
		key  uint64
		slot uint64
		rank int
	}
	// gone holds the blocks that Removes took out of one page, its
	// number + 1 in key (0: none) and its index in p, whose values are
	// still in the page's vals: at the slots set in slots, n of them.
	// The page's vals are then in the order of its starts and these
	// slots together. A program that frees in address order frees the
	// blocks of a page one after the other, and closing each gap at
	// once moved a quarter of the page's values each time, on average:
	// the gaps close together, in one pass, when a Remove goes to
	// another page or a run is put into this one (closeGaps). A Put
	// at a gone slot takes its place back without moving any.
	gone struct {
		key   uint64
		p     uint32
		n     int
		slots [idxPageSlots / 64]uint64
	}
}

const nearChunks = 64

// noChunk is the index in Map.near of a chunk that has no pages.
const noChunk = ^uint32(0)

const (
	idxPageBits  = 12 // 4 KiB pages of address space
	idxAlignBits = 3  // blocks 8-byte aligned
	idxPageSlots = 1 << (idxPageBits - idxAlignBits)
	idxChunkBits = 9 // 512 pages: 2 MiB of address space a chunk
	pageRunBits  = 8 // 256 pages a run
)

// indexPage holds the blocks that start in a page: starts has a bit set
// for each 8-byte slot where one does, and vals their values, in the
// order of their slots.
type indexPage struct {
	starts [idxPageSlots / 64]uint64
	vals   []uint32
}

// rank returns where the value of slot is in vals (or would go), and
// whether the page has it.
func (pg *indexPage) rank(slot uint64) (int, bool) {
	w, bit := slot/64, uint64(1)<<(slot%64)
	r := bits.OnesCount64(pg.starts[w] & (bit - 1))
	for _, s := range pg.starts[:w] {
		r += bits.OnesCount64(s)
	}
	return r, pg.starts[w]&bit != 0
}

// rankGone is rank for the page whose gone slots are gone (Map.gone):
// their values are still in vals.
func (pg *indexPage) rankGone(slot uint64, gone *[idxPageSlots / 64]uint64) (int, bool) {
	w, bit := slot/64, uint64(1)<<(slot%64)
	r := bits.OnesCount64((pg.starts[w] | gone[w]) & (bit - 1))
	for i := range w {
		r += bits.OnesCount64(pg.starts[i] | gone[i])
	}
	return r, pg.starts[w]&bit != 0
}

// indexChunk holds index + 1 in Map.pages of each page of a chunk
// that has blocks; 0 for the others.
type indexChunk struct {
	pages [1 << idxChunkBits]uint32
	live  uint32 // how many of pages are set
}

// page returns the index of the page of number key, and false if it has
// no blocks.
func (x *Map) page(key uint64) (uint32, bool) {
	if key+1 == x.lastKey[0] {
		return x.lastIdx[0], true
	}
	if key+1 == x.lastKey[1] {
		x.lastKey[0], x.lastKey[1] = x.lastKey[1], x.lastKey[0]
		x.lastIdx[0], x.lastIdx[1] = x.lastIdx[1], x.lastIdx[0]
		return x.lastIdx[0], true
	}
	ck := key >> idxChunkBits
	n := &x.near[ck%nearChunks]
	if n.key != ck+1 {
		c, ok := x.dir[ck]
		if !ok {
			// Remembered as absent too: a program that carves fresh
			// memory allocates in chunks the map does not have yet,
			// and each allocation looks its address up first.
			c = noChunk
		}
		n.key, n.idx = ck+1, c
	}
	if n.idx == noChunk {
		return 0, false
	}
	p := x.chunks[n.idx].pages[key&(1<<idxChunkBits-1)]
	if p == 0 {
		return 0, false
	}
	x.remember(key, p-1)
	return p - 1, true
}

func (x *Map) remember(key uint64, p uint32) {
	x.lastKey[1], x.lastIdx[1] = x.lastKey[0], x.lastIdx[0]
	x.lastKey[0], x.lastIdx[0] = key+1, p
}

// at returns page p, to read.
func (x *Map) at(p uint32) *indexPage {
	return &x.pages[p>>pageRunBits][p&(1<<pageRunBits-1)]
}

// atw returns page p, to change: its run is x's own, copied with the
// values of its pages if it may be shared.
func (x *Map) atw(p uint32) *indexPage {
	if x.shares(p) {
		x.own(p >> pageRunBits)
	}
	return x.at(p)
}

// shares reports whether page p's run may be another Map's too.
func (x *Map) shares(p uint32) bool {
	run := p >> pageRunBits
	return int(run) < len(x.shared) && x.shared[run]
}

// own makes run x's own, copying it with the values of its pages.
func (x *Map) own(run uint32) {
	pages := slices.Clone(x.pages[run])
	for i := range pages {
		pages[i].vals = slices.Clone(pages[i].vals)
	}
	x.pages[run] = pages
	x.shared[run] = false
}

func slotOf(addr uint64) uint64 { return addr >> idxAlignBits & (idxPageSlots - 1) }

// Find returns the value of addr, if x has it.
func (x *Map) Find(addr uint64) (uint32, bool) {
	if x.n == 0 {
		return 0, false
	}
	if addr&(1<<idxAlignBits-1) != 0 {
		v, ok := x.odd[addr]
		return v, ok
	}
	p, ok := x.page(addr >> idxPageBits)
	if !ok {
		return 0, false
	}
	pg := x.at(p)
	slot := slotOf(addr)
	if pg.starts[slot/64]&(1<<(slot%64)) == 0 {
		// Most lookups are of allocations, at addresses where no block
		// lives: no need to count the blocks before.
		return 0, false
	}
	var r int
	if g := &x.gone; g.key == addr>>idxPageBits+1 {
		r, _ = pg.rankGone(slot, &g.slots)
	} else {
		r, _ = pg.rank(slot)
	}
	return pg.vals[r], true
}

// Put makes v the value of addr. If addr had one already, it returns
// that, with existed set.
func (x *Map) Put(addr uint64, v uint32) (old uint32, existed bool) {
	if addr&(1<<idxAlignBits-1) != 0 {
		if x.odd == nil {
			x.odd = make(map[uint64]uint32)
		}
		old, existed = x.odd[addr]
		x.odd[addr] = v
	} else {
		key := addr >> idxPageBits
		p, ok := x.page(key)
		if !ok {
			p = x.newPage(key)
		}
		pg := x.atw(p)
		slot := slotOf(addr)
		var r int
		var had bool
		g := &x.gone
		if g.key == key+1 {
			r, had = pg.rankGone(slot, &g.slots)
		} else {
			r, had = pg.rank(slot)
		}
		if had {
			old, existed = pg.vals[r], true
			pg.vals[r] = v
		} else if w, bit := slot/64, uint64(1)<<(slot%64); g.key == key+1 && g.slots[w]&bit != 0 {
			// A gone slot: its place in vals is there still.
			g.slots[w] &^= bit
			g.n--
			pg.starts[w] |= bit
			pg.vals[r] = v
		} else {
			pg.starts[slot/64] |= 1 << (slot % 64)
			x.removed.key = 0
			if cap(pg.vals) == 0 {
				// The page will most likely fill as the one before did:
				// the allocator carves its blocks alike.
				pg.vals = make([]uint32, 0, max(x.lastFill, 4))
			}
			pg.vals = insertVal(pg.vals, r, v)
			x.lastFill = len(pg.vals)
		}
	}
	if !existed {
		x.n++
	}
	return old, existed
}

// PutAll makes vals[i] the value of addrs[i], for every i, as Put would,
// and appends to olds the values it replaces. It inserts the addresses
// that follow each other up in one page at once (one walk to the page,
// one merge of its values): the analysis enters the surviving blocks of
// a trace block in the order they were allocated, which for a heap carved
// from fresh memory is the order of their addresses.
func (x *Map) PutAll(addrs []uint64, vals []uint32, olds []uint32) []uint32 {
	for i := 0; i < len(addrs); {
		addr := addrs[i]
		// 1. The run: the addresses from i on that go up in addr's page.
		key := addr >> idxPageBits
		var add [idxPageSlots / 64]uint64
		j := i
		for prev := uint64(0); j < len(addrs); j++ {
			a := addrs[j]
			if a&(1<<idxAlignBits-1) != 0 || a>>idxPageBits != key || j > i && a <= prev {
				break
			}
			slot := slotOf(a)
			add[slot/64] |= 1 << (slot % 64)
			prev = a
		}
		if j-i < 2 {
			// Alone in its page, or not aligned: Put is as quick.
			if old, had := x.Put(addr, vals[i]); had {
				olds = append(olds, old)
			}
			i++
			continue
		}
		// 2. Merge the run into the page, unless the page has one of its
		// addresses already (only a damaged trace does that): then Put
		// tells which.
		if x.gone.key == key+1 {
			x.closeGaps()
		}
		p, ok := x.page(key)
		if !ok {
			p = x.newPage(key)
		}
		pg := x.atw(p)
		if !pg.putRun(add, vals[i:j], x.lastFill) {
			for k := i; k < j; k++ {
				if old, had := x.Put(addrs[k], vals[k]); had {
					olds = append(olds, old)
				}
			}
			i = j
			continue
		}
		x.n += j - i
		x.lastFill = len(pg.vals)
		x.removed.key = 0
		i = j
	}
	return olds
}

// putRun adds to pg the blocks whose slots add has, with values vals in
// the order of their slots, and returns true; or changes nothing and
// returns false if pg has one of them already. A page given its first
// blocks gets room for fill, the blocks the page filled last has: the
// allocator carves its pages alike.
func (pg *indexPage) putRun(add [idxPageSlots / 64]uint64, vals []uint32, fill int) bool {
	var above bool // pg has a block above the lowest slot of add
	low := -1
	for w := range add {
		if pg.starts[w]&add[w] != 0 {
			return false
		}
		if low < 0 && add[w] != 0 {
			low = w
			lowBit := add[w] & -add[w]
			above = pg.starts[w]&^(lowBit|(lowBit-1)) != 0
		} else if low >= 0 && pg.starts[w] != 0 {
			above = true
		}
	}
	n, m := len(pg.vals), len(vals)
	if n+m > cap(pg.vals) {
		c := n + m
		if n == 0 {
			c = max(c, fill)
		} else {
			c = max(c, n+n/2+4)
		}
		grown := make([]uint32, n, c)
		copy(grown, pg.vals)
		pg.vals = grown
	}
	if !above {
		// The run goes after every block the page has.
		pg.vals = append(pg.vals, vals...)
	} else {
		// Merge from the top, over the union of the slots: a slot of
		// add takes the run's next value down, another the page's.
		pg.vals = pg.vals[:n+m]
		a, b := n-1, m-1
		w := n + m - 1
		for word := len(add) - 1; word >= 0 && b >= 0; word-- {
			union := pg.starts[word] | add[word]
			for union != 0 && b >= 0 {
				bit := 63 - bits.LeadingZeros64(union)
				union &^= 1 << bit
				if add[word]&(1<<bit) != 0 {
					pg.vals[w] = vals[b]
					b--
				} else {
					pg.vals[w] = pg.vals[a]
					a--
				}
				w--
			}
		}
	}
	for w := range add {
		pg.starts[w] |= add[w]
	}
	return true
}

// insertVal inserts v at vals[r]. It grows vals by half, not double as
// append does: the slack of every page is memory per block.
func insertVal(vals []uint32, r int, v uint32) []uint32 {
	if len(vals) == cap(vals) {
		grown := make([]uint32, len(vals), len(vals)+len(vals)/2+4)
		copy(grown, vals)
		vals = grown
	}
	vals = vals[:len(vals)+1]
	copy(vals[r+1:], vals[r:])
	vals[r] = v
	return vals
}

// Remove takes addr out of x, if it is there, and returns its value.
func (x *Map) Remove(addr uint64) (old uint32, existed bool) {
	if addr&(1<<idxAlignBits-1) != 0 {
		if old, existed = x.odd[addr]; existed {
			delete(x.odd, addr)
			x.n--
		}
		return old, existed
	}
	key := addr >> idxPageBits
	// page, without its call for the page found last, as where a
	// program frees its blocks one after the other.
	p, ok := x.lastIdx[0], key+1 == x.lastKey[0]
	if !ok {
		if p, ok = x.page(key); !ok {
			return 0, false
		}
	}
	slot := slotOf(addr)
	pg := x.at(p)
	w, bit := slot/64, uint64(1)<<(slot%64)
	if pg.starts[w]&bit == 0 {
		return 0, false
	}
	g := &x.gone
	if g.key != key+1 {
		x.closeGaps()
		g.key, g.p = key+1, p
		pg = x.at(p) // closeGaps may have copied its run (see atw)
	}
	var r int
	// The blocks from the one removed last up to slot, if that was a
	// little below it: in its word, or the word before. Its value is
	// still in vals, a gone slot.
	if rm := &x.removed; rm.key == key+1 && rm.slot < slot && rm.slot/64+1 >= w {
		if rm.slot/64 == w {
			r = rm.rank + bits.OnesCount64((pg.starts[w]|g.slots[w])&(bit-1)>>(rm.slot%64))
		} else {
			r = rm.rank + bits.OnesCount64((pg.starts[w-1]|g.slots[w-1])>>(rm.slot%64)) +
				bits.OnesCount64((pg.starts[w]|g.slots[w])&(bit-1))
		}
	} else {
		r, _ = pg.rankGone(slot, &g.slots)
	}
	if x.shares(p) { // atw, without its call where runs are the Map's own
		pg = x.atw(p)
	}
	old = pg.vals[r]
	pg.starts[w] &^= bit
	g.slots[w] |= bit
	g.n++
	x.n--
	x.removed.key, x.removed.slot, x.removed.rank = key+1, slot, r
	if g.n == len(pg.vals) {
		// Every value left is gone.
		pg.vals = pg.vals[:0]
		g.key, g.n, g.slots = 0, 0, [idxPageSlots / 64]uint64{}
		x.freePage(key, p)
	}
	return old, true
}

// closeGaps takes the values of the gone slots out of their page's vals
// (see Map.gone).
func (x *Map) closeGaps() {
	g := &x.gone
	if g.n == 0 {
		// None, or each taken back by a Put.
		g.key = 0
		return
	}
	pg := x.atw(g.p)
	// The words below the lowest gone slot have none: their values stay.
	lo := 0
	for g.slots[lo] == 0 {
		lo++
	}
	r := 0
	for _, s := range pg.starts[:lo] {
		r += bits.OnesCount64(s)
	}
	if g.n == 1 {
		r += bits.OnesCount64(pg.starts[lo] & (g.slots[lo] - 1))
		pg.vals = removeVal(pg.vals, r)
		g.slots[lo] = 0
	} else if n := len(pg.vals); g.n*gapCost < n-r {
		// A few gaps in many values, as a program that frees here and
		// there makes: each closed apart from the nearer end of vals,
		// the highest first, so that the ranks below it hold.
		for i := len(g.slots) - 1; i >= lo; i-- {
			for g.slots[i] != 0 {
				top := uint64(63 - bits.LeadingZeros64(g.slots[i]))
				r, _ := pg.rankGone(uint64(i)*64+top, &g.slots)
				pg.vals = removeVal(pg.vals, r)
				g.slots[i] &^= 1 << top
			}
		}
	} else {
		// Each live value from the lowest gap up moves down to w, from
		// its rank among the live and gone slots together.
		w := r
		vals := pg.vals
		for i := lo; i < len(pg.starts); i++ {
			u := pg.starts[i] | g.slots[i]
			for live := pg.starts[i]; live != 0; live &= live - 1 {
				vals[w] = vals[r+bits.OnesCount64(u&(live&-live-1))]
				w++
			}
			r += bits.OnesCount64(u)
		}
		pg.vals = vals[:w]
		clear(g.slots[lo:])
	}
	g.key, g.n = 0, 0
	x.removed.key = 0
}

// gapCost is about what closing a gap apart costs (removeVal), in
// values moved by closeGaps' pass over the page.
const gapCost = 4

// removeVal takes vals[r] out of vals, moving the values on the nearer
// side of it: a program that frees its blocks in address order takes
// them from the front of each page, and moving all the values after each
// would cost the square of the page's blocks. The values' memory before
// the new front is the page's until it grows again.
func removeVal(vals []uint32, r int) []uint32 {
	if n := len(vals); r < n/2 {
		copy(vals[1:r+1], vals[:r])
		return vals[1:]
	}
	copy(vals[r:], vals[r+1:])
	return vals[:len(vals)-1]
}

// newPage adds the page of number key, which has none, and returns its
// index.
func (x *Map) newPage(key uint64) uint32 {
	var p uint32
	if n := len(x.freePages); n > 0 {
		p, x.freePages = x.freePages[n-1], x.freePages[:n-1]
	} else {
		p = x.npages
		if p>>pageRunBits == uint32(len(x.pages)) {
			run := make([]indexPage, 1<<pageRunBits)
			// A page is read (its starts) before it is written:
			// mapped ahead, fresh memory is not first the zero page.
			pages.Prefault(pages.SliceBytes(run))
			x.pages = append(x.pages, run)
		}
		x.npages++
	}
	if x.dir == nil {
		x.dir = make(map[uint64]uint32)
	}
	c, ok := x.dir[key>>idxChunkBits]
	if !ok {
		if n := len(x.freeChunks); n > 0 {
			c, x.freeChunks = x.freeChunks[n-1], x.freeChunks[:n-1]
		} else {
			c = uint32(len(x.chunks))
			x.chunks = append(x.chunks, indexChunk{})
		}
		x.dir[key>>idxChunkBits] = c
		if n := &x.near[key>>idxChunkBits%nearChunks]; n.key == key>>idxChunkBits+1 {
			n.idx = c
		}
	}
	x.chunks[c].pages[key&(1<<idxChunkBits-1)] = p + 1
	x.chunks[c].live++
	x.remember(key, p)
	return p
}

// freePage gives back page p, of number key, which holds no block now,
// and its chunk if that has no other page. The page keeps its values'
// memory for the next page it is given out as.
func (x *Map) freePage(key uint64, p uint32) {
	x.freePages = append(x.freePages, p)
	x.removed.key = 0
	ck := key >> idxChunkBits
	c := x.dir[ck]
	x.chunks[c].pages[key&(1<<idxChunkBits-1)] = 0
	if x.chunks[c].live--; x.chunks[c].live == 0 {
		delete(x.dir, ck)
		x.freeChunks = append(x.freeChunks, c)
		if n := &x.near[ck%nearChunks]; n.key == ck+1 {
			n.key = 0
		}
	}
	for i := range x.lastKey {
		if x.lastKey[i] == key+1 {
			x.lastKey[i] = 0
		}
	}
}

// Clone returns a copy of x that shares its runs of pages until either
// writes to one: cloning a map of a million blocks copies none of them.
func (x *Map) Clone() Map {
	x.Share()
	c := *x
	c.pages, c.shared = slices.Clone(x.pages), slices.Clone(x.shared)
	c.freePages = slices.Clone(x.freePages)
	c.chunks, c.freeChunks = slices.Clone(x.chunks), slices.Clone(x.freeChunks)
	c.dir, c.odd = maps.Clone(x.dir), maps.Clone(x.odd)
	return c
}

// Share marks every run of pages shared, writing x only if one is not
// yet: clones made by several goroutines at once then only read x.
func (x *Map) Share() { MarkShared(&x.shared, len(x.pages)) }

// Len returns how many addresses x holds.
func (x *Map) Len() int { return x.n }

// Each calls f with every address x holds and its value, in no order.
func (x *Map) Each(f func(addr uint64, v uint32)) { x.EachOf(0, 1, f) }

// EachOf calls f as Each does, with the addresses of part part of x (from
// 0) cut into parts parts. The parts may be gone over at once, by
// goroutines of their own, while nothing changes x.
func (x *Map) EachOf(part, parts int, f func(addr uint64, v uint32)) {
	for ck, c := range x.dir {
		if int(c)%parts != part {
			continue
		}
		for i, p := range x.chunks[c].pages {
			if p == 0 {
				continue
			}
			key := ck<<idxChunkBits | uint64(i)
			base := key << idxPageBits
			pg := x.at(p - 1)
			if x.gone.key == key+1 {
				pg.eachGone(base, &x.gone.slots, f)
				continue
			}
			r := 0
			for w, s := range pg.starts {
				for s != 0 {
					slot := uint64(w*64 + bits.TrailingZeros64(s))
					f(base|slot<<idxAlignBits, pg.vals[r])
					r++
					s &= s - 1
				}
			}
		}
	}
	if part != 0 {
		return
	}
	for addr, v := range x.odd {
		f(addr, v)
	}
}

// eachGone calls f with every address of pg, the page of address base
// whose gone slots are gone (see Map.gone), and its value.
func (pg *indexPage) eachGone(base uint64, gone *[idxPageSlots / 64]uint64, f func(addr uint64, v uint32)) {
	r := 0
	for w, s := range pg.starts {
		for u := s | gone[w]; u != 0; u &= u - 1 {
			if s&u&-u != 0 {
				slot := uint64(w*64 + bits.TrailingZeros64(u))
				f(base|slot<<idxAlignBits, pg.vals[r])
			}
			r++
		}
	}
}

// MarkShared makes *shared say that all n runs of a copy-on-write table
// are shared, writing it only if it does not say so yet: a Map's runs of
// pages, and the analysis's heap table's chunks.
func MarkShared(shared *[]bool, n int) {
	if len(*shared) == n && !slices.Contains(*shared, false) {
		return
	}
	all := make([]bool, n)
	for i := range all {
		all[i] = true
	}
	*shared = all
}

// HeldBytes returns about how many bytes x holds that counted does not
// have yet, and adds them to it. Clones share their runs of pages (see
// Clone): counted with the same set, a run shared by several maps counts
// once, so that the sum over several clones is the memory they hold
// together.
func (x *Map) HeldBytes(counted map[unsafe.Pointer]bool) uint64 {
	n := uint64(cap(x.chunks))*uint64(unsafe.Sizeof(indexChunk{})) +
		uint64(cap(x.freePages)+cap(x.freeChunks))*4 + uint64(len(x.dir)+len(x.odd))*16
	for _, run := range x.pages {
		key := unsafe.Pointer(unsafe.SliceData(run))
		if counted[key] {
			continue
		}
		counted[key] = true
		n += uint64(cap(run)) * uint64(unsafe.Sizeof(indexPage{}))
		for i := range run {
			n += uint64(cap(run[i].vals)) * 4
		}
	}
	return n
}
