// Package addrmap maps the addresses of heap blocks to 32-bit values.
//
// The analysis's heap table keeps its blocks' places in one (every
// allocation looks its address up once the map is not empty, and so does
// every free the trace does not name by handle); the recorder keeps the
// sizes of a process's live blocks in one, for its leak scan at exit.
//
// It is indexed by address, not by hash: a 4 KiB page of address space
// has the values of the 256 blocks that may start in it 16-byte aligned,
// as glibc's do, in 1 KiB. Allocators carve blocks one after the other and
// programs free in runs, so consecutive events touch one page: a hash
// table spread python3's two million long-lived blocks over 64 MiB that
// every insert and lookup missed in the cache, and grew by rehashing all
// of them. Here nothing moves once placed, and a page is found through a
// directory of 2 MiB chunks of address space, or the one found last.
//
// A page costs 1 KiB while a block starts in it, against 16 bytes a block
// in a hash table: it wins when pages hold many blocks, and a page with a
// single block costs a quarter of the memory that page spans in the
// traced program, which is live. Emptied pages and chunks are given out
// again, so the map holds as many as there are with live blocks.
// Addresses that are not 16-byte aligned go to a Go map. (The trace
// Writer's addrTable is laid out the same way for the same reason; it
// also marks listed addresses and empties itself every trace block, in
// memory outside the Go heap.)
package addrmap

import (
	"maps"
	"slices"
)

// Map is a map from addresses to values. The zero Map is empty and ready.
type Map struct {
	// pages are in runs of 1<<pageRunBits, so that adding one copies none.
	pages      [][]indexPage
	shared     []bool // by run: the run may be another map's too (see Clone)
	npages     uint32
	pageLive   []uint16 // by page: how many of its values are set
	freePages  []uint32
	chunks     []indexChunk
	freeChunks []uint32
	dir        map[uint64]uint32 // chunk number → index in chunks
	odd        map[uint64]uint32 // addresses not aligned to 16 bytes → value
	n          int               // blocks indexed

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
}

const nearChunks = 64

const (
	idxPageBits  = 12 // 4 KiB pages of address space
	idxAlignBits = 4  // blocks 16-byte aligned
	idxPageSlots = 1 << (idxPageBits - idxAlignBits)
	idxChunkBits = 9 // 512 pages: 2 MiB of address space a chunk
	pageRunBits  = 8 // 256 pages, 256 KiB, a run
)

// indexPage holds value + 1 of the block that starts at each 16-byte slot
// of a page; 0 where none does.
type indexPage [idxPageSlots]uint32

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
			return 0, false
		}
		n.key, n.idx = ck+1, c
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

// atw returns page p, to change: its run is x's own, copied if it may be
// shared.
func (x *Map) atw(p uint32) *indexPage {
	if run := p >> pageRunBits; int(run) < len(x.shared) && x.shared[run] {
		x.pages[run] = slices.Clone(x.pages[run])
		x.shared[run] = false
	}
	return &x.pages[p>>pageRunBits][p&(1<<pageRunBits-1)]
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
	r := x.at(p)[slotOf(addr)]
	return r - 1, r != 0
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
		r := &x.atw(p)[slotOf(addr)]
		old, existed = *r-1, *r != 0
		if !existed {
			x.pageLive[p]++
		}
		*r = v + 1
	}
	if !existed {
		x.n++
	}
	return old, existed
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
	p, ok := x.page(key)
	if !ok || x.at(p)[slotOf(addr)] == 0 {
		return 0, false
	}
	r := &x.atw(p)[slotOf(addr)]
	old, *r = *r-1, 0
	x.n--
	if x.pageLive[p]--; x.pageLive[p] == 0 {
		x.freePage(key, p)
	}
	return old, true
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
			x.pages = append(x.pages, make([]indexPage, 1<<pageRunBits))
		}
		x.npages++
		x.pageLive = append(x.pageLive, 0)
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
	}
	x.chunks[c].pages[key&(1<<idxChunkBits-1)] = p + 1
	x.chunks[c].live++
	x.remember(key, p)
	return p
}

// freePage gives back page p, of number key, which holds no block now
// (all its values are 0), and its chunk if that has no other page.
func (x *Map) freePage(key uint64, p uint32) {
	x.freePages = append(x.freePages, p)
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
	c.pageLive, c.freePages = slices.Clone(x.pageLive), slices.Clone(x.freePages)
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
func (x *Map) Each(f func(addr uint64, v uint32)) {
	for ck, c := range x.dir {
		for i, p := range x.chunks[c].pages {
			if p == 0 {
				continue
			}
			base := (ck<<idxChunkBits | uint64(i)) << idxPageBits
			for slot, v := range x.at(p - 1) {
				if v != 0 {
					f(base|uint64(slot)<<idxAlignBits, v-1)
				}
			}
		}
	}
	for addr, v := range x.odd {
		f(addr, v)
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
