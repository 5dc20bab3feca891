package record

import (
	"maps"
	"math/bits"
	"slices"
	"sort"
)

// blockIndex numbers the blocks of a blockTable in increasing order of
// address, for a leak scan, and finds the block that holds any address.
// It costs 4 bytes a page of the table and 8 bytes a block of more than a
// page: the scan's per-block state is indexed by these numbers.
type blockIndex struct {
	t     *blockTable
	pages []uint32 // the table's pages, in increasing order of address
	base  []uint32 // by page: the number of its first block
	large []uint64 // the blocks of more than a page, in increasing order
	odd   []uint64 // the table's blocks not 8-byte aligned, in increasing order; numbered after the others
	n     int      // the table's blocks, the odd ones left out

	lo, hi uint64 // every block lies in [lo, hi)

	main finder // for find, on the scan's own goroutine
}

// finder finds blocks of a blockIndex for one goroutine: the table's own
// lookups remember the pages they found in the table, so several
// goroutines finding at once each need a finder, with its memory of the
// page and chunk found last.
type finder struct {
	ix       *blockIndex
	lastKey  uint64 // page number + 1 of the page found last (0: none)
	lastPage *tablePage
	lastBase uint32                  // the number of its first block
	near     [nearChunks]*tableChunk // chunks found, at their number's low bits
}

func newBlockIndex(t *blockTable) *blockIndex {
	t.compact()
	ix := &blockIndex{t: t, pages: t.sortedPages(), base: make([]uint32, t.npages)}
	ix.main.ix = ix
	ix.odd = slices.Sorted(maps.Keys(t.odd))
	ix.lo = ^uint64(0)
	for _, p := range ix.pages {
		ix.base[p] = uint32(ix.n)
		pg := t.at(p)
		for r, s := range pg.sizes {
			if s > pageSize-8 {
				ix.large = append(ix.large, ix.addrOf(pg, r))
			}
		}
		ix.n += len(pg.sizes)
		first, last := ix.addrOf(pg, 0), ix.addrOf(pg, len(pg.sizes)-1)
		ix.lo = min(ix.lo, first)
		ix.hi = max(ix.hi, last+max(t.sizeAt(pg, len(pg.sizes)-1, last), 1))
	}
	for _, a := range ix.odd {
		ix.lo, ix.hi = min(ix.lo, a), max(ix.hi, a+max(t.odd[a], 1))
	}
	return ix
}

// count returns how many blocks there are.
func (ix *blockIndex) count() int { return ix.n + len(ix.odd) }

// addrOf returns the address of the block of rank r in page pg.
func (ix *blockIndex) addrOf(pg *tablePage, r int) uint64 {
	base := (pg.key - 1) << tablePageBits
	for w, word := range pg.starts {
		if c := bits.OnesCount64(word); r >= c {
			r -= c
			continue
		}
		for range r {
			word &= word - 1
		}
		return base + uint64(w*64+bits.TrailingZeros64(word))<<tableSlotBits
	}
	panic("blockIndex: rank past the page's blocks")
}

// lastAtOrBefore returns the rank and address of the last block of page p
// that starts at or before slot s, if there is one.
func lastAtOrBefore(pg *tablePage, s uint) (int, uint64, bool) {
	w := int(s / 64)
	word := pg.starts[w] & (2<<(s%64) - 1)
	for word == 0 {
		if w--; w < 0 {
			return 0, 0, false
		}
		word = pg.starts[w]
	}
	b := 63 - bits.LeadingZeros64(word)
	slot := uint(w*64 + b)
	return pg.rank(slot), (pg.key-1)<<tablePageBits + uint64(slot)<<tableSlotBits, true
}

// holds reports whether the block of size bytes at start holds v for the
// scan. A pointer to a block of size 0 must point at its start.
//
// glibc's malloc keeps pointers to its chunk headers in its own state
// (main_arena's top chunk, bins and last remainder, in libc's .data, a
// root). A chunk's header starts 16 bytes before its block, and with
// 16-byte chunks the header of the chunk after a block of 8 mod 16 bytes
// lies in the block's last 8 bytes: such a pointer would keep the block
// possibly lost. memcheck, whose allocator is its own, never sees them;
// so a pointer to exactly that place is not taken for one to the block.
func holds(start, size, v uint64) bool {
	if v == start {
		return true
	}
	return v > start && v-start < size && v != start+(size+8+15)&^15-16
}

// find returns the number, start and size of the block that holds v (see
// holds), if one does.
//
// The block is the last one starting at or before v: in v's page, else
// the last of the page before (a block crossing into v's page), else one
// of more than a page. A block that starts before v and ends before it
// means that none holds v: blocks do not overlap, so one that starts
// further back would cover it.
func (ix *blockIndex) find(v uint64) (num uint32, start, size uint64, ok bool) {
	return ix.main.find(v)
}

// page returns the table's page of number key and the number of its first
// block, and false if no block starts in it, as blockTable.page does but
// with f's memory.
func (f *finder) page(key uint64) (*tablePage, uint32, bool) {
	if key+1 == f.lastKey {
		return f.lastPage, f.lastBase, true
	}
	ck := key >> tableChunkBits
	near := &f.near[ck%nearChunks]
	c := *near
	if c == nil || c.key != ck {
		if c = f.ix.t.dir[ck]; c == nil {
			return nil, 0, false
		}
		*near = c
	}
	p := c.pages[key&(1<<tableChunkBits-1)]
	if p == 0 {
		return nil, 0, false
	}
	f.lastKey, f.lastPage, f.lastBase = key+1, f.ix.t.at(p-1), f.ix.base[p-1]
	return f.lastPage, f.lastBase, true
}

// find is blockIndex.find, for f's goroutine.
func (f *finder) find(v uint64) (num uint32, start, size uint64, ok bool) {
	return f.findSized(v, true)
}

// findStart is find, but for a pointer to a block's start it leaves size
// 0: the sizes are one more place in memory to look at, and a sweep
// keeps only the block's number.
func (f *finder) findStart(v uint64) (num uint32, start, size uint64, ok bool) {
	return f.findSized(v, false)
}

func (f *finder) findSized(v uint64, sized bool) (num uint32, start, size uint64, ok bool) {
	ix := f.ix
	if v < ix.lo || v >= ix.hi {
		return 0, 0, 0, false
	}
	if len(ix.odd) > 0 {
		if i := sort.Search(len(ix.odd), func(i int) bool { return ix.odd[i] > v }) - 1; i >= 0 && holds(ix.odd[i], ix.t.odd[ix.odd[i]], v) {
			return uint32(ix.n + i), ix.odd[i], ix.t.odd[ix.odd[i]], true
		}
	}
	t, key := ix.t, v>>tablePageBits
	if pg, base, found := f.page(key); found {
		// Most pointers found point at a block's start: its slot's bit.
		if pg.startsAt(v) {
			r := pg.rank(slotIn(v))
			if !sized {
				return base + uint32(r), v, 0, true
			}
			return base + uint32(r), v, t.sizeAt(pg, r, v), true
		}
		if r, a, found := lastAtOrBefore(pg, slotIn(v)); found {
			if a == v && !sized {
				return base + uint32(r), a, 0, true
			}
			size := t.sizeAt(pg, r, a)
			return base + uint32(r), a, size, holds(a, size, v)
		}
	}
	if pg, base, found := f.page(key - 1); found {
		if r, a, found := lastAtOrBefore(pg, tablePageSlots-1); found {
			size := t.sizeAt(pg, r, a)
			return base + uint32(r), a, size, holds(a, size, v)
		}
	}
	i := sort.Search(len(ix.large), func(i int) bool { return ix.large[i] > v }) - 1
	if i < 0 {
		return 0, 0, 0, false
	}
	a := ix.large[i]
	pg, base, _ := f.page(a >> tablePageBits)
	r := pg.rank(slotIn(a))
	size = t.sizeAt(pg, r, a)
	return base + uint32(r), a, size, holds(a, size, v)
}

// each calls f with each block's number, address and size, in increasing
// order of address, from the first block at lo or after to the last before
// hi.
func (ix *blockIndex) each(lo, hi uint64, f func(num uint32, addr, size uint64)) {
	odd := ix.odd[sort.Search(len(ix.odd), func(i int) bool { return ix.odd[i] >= lo }):]
	oddNum := uint32(ix.n + len(ix.odd) - len(odd))
	flushOdd := func(before uint64) {
		for len(odd) > 0 && odd[0] < before && odd[0] < hi {
			f(oddNum, odd[0], ix.t.odd[odd[0]])
			odd, oddNum = odd[1:], oddNum+1
		}
	}
	t := ix.t
	k := sort.Search(len(ix.pages), func(k int) bool { return t.at(ix.pages[k]).key-1 >= lo>>tablePageBits })
	for ; k < len(ix.pages); k++ {
		p := ix.pages[k]
		if (t.at(p).key-1)<<tablePageBits >= hi {
			break
		}
		base := ix.base[p]
		t.eachInPage(p, func(r int, addr, size uint64) {
			if addr >= lo && addr < hi {
				flushOdd(addr)
				f(base+uint32(r), addr, size)
			}
		})
	}
	flushOdd(hi)
}
