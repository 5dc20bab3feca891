package analysis

import "slices"

// HeapMap is the address space of a process's live blocks at the end of
// the window, in cells of equal size: how full each cell is shows how
// fragmented the heap is. The live blocks lie in regions (a heap, an
// arena, a block mapped on its own), far apart; the map has cells for the
// regions only, in address order, the cells of each region after those of
// the one before.
type HeapMap struct {
	CellBytes uint64 // the size of a cell, a multiple of 16
	Regions   []HeapRegion
	Cells     []HeapCell
}

// HeapRegion is a stretch of address space with live blocks no more than
// regionGap apart; its cells are Cells[FirstCell:FirstCell+n], n the
// region's length divided by CellBytes, rounded up.
type HeapRegion struct {
	Start, End uint64 // the first byte of its first block; the end of its last
	FirstCell  int
}

// HeapCell is what is live in one cell of a heap map.
type HeapCell struct {
	Used   uint64 // bytes of live blocks in the cell
	Blocks uint64 // live blocks that start in the cell
	// Biggest is the biggest block that starts in the cell, if Blocks is
	// not 0: what the cell holds, for the UI to show.
	Biggest HeapObject
}

// regionGap is the distance between two live blocks that puts them in two
// regions: more than any allocator leaves inside a heap it manages.
const regionGap = 1 << 20

// heapMap makes the map of the blocks live now, in about cells cells.
func (rp *replay) heapMap(cells int, newIndex []int32) *HeapMap {
	var blocks []HeapObject
	rp.heap.each(func(addr uint64, b *block) {
		if b.site == uncounted {
			return
		}
		b.site = newIndex[b.site]
		blocks = append(blocks, rp.object(addr, b, 0))
	})
	return mapBlocks(blocks, cells)
}

// mapBlocks makes the heap map of blocks, in about cells cells.
func mapBlocks(blocks []HeapObject, cells int) *HeapMap {
	hm := &HeapMap{CellBytes: 16}
	if len(blocks) == 0 || cells <= 0 {
		return hm
	}
	slices.SortFunc(blocks, func(a, b HeapObject) int { return cmpUint(a.Addr, b.Addr) })
	// The regions, and their length in all.
	var span uint64
	for _, b := range blocks {
		end := b.Addr + max(b.Size, 1)
		if n := len(hm.Regions); n > 0 && b.Addr <= hm.Regions[n-1].End+regionGap {
			hm.Regions[n-1].End = max(hm.Regions[n-1].End, end)
			continue
		}
		hm.Regions = append(hm.Regions, HeapRegion{Start: b.Addr, End: end})
	}
	for _, r := range hm.Regions {
		span += r.End - r.Start
	}
	hm.CellBytes = max(16, (span/uint64(cells)+15)&^15)
	for i := range hm.Regions {
		r := &hm.Regions[i]
		r.FirstCell = len(hm.Cells)
		hm.Cells = append(hm.Cells, make([]HeapCell, (r.End-r.Start+hm.CellBytes-1)/hm.CellBytes)...)
	}
	// Each block fills the cells it overlaps.
	ri := 0
	for _, b := range blocks {
		for b.Addr >= hm.Regions[ri].End {
			ri++
		}
		r := hm.Regions[ri]
		first := r.FirstCell + int((b.Addr-r.Start)/hm.CellBytes)
		c := &hm.Cells[first]
		c.Blocks++
		if c.Blocks == 1 || b.Size > c.Biggest.Size {
			c.Biggest = b
		}
		for off, left := b.Addr-r.Start, b.Size; left > 0; {
			cell := &hm.Cells[r.FirstCell+int(off/hm.CellBytes)]
			n := min(left, hm.CellBytes-off%hm.CellBytes)
			cell.Used += n
			off, left = off+n, left-n
		}
	}
	return hm
}
