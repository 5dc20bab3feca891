package analysis

import "testing"

// TestHeapMap maps blocks in two regions far apart, one of them with a
// block over several cells: every byte of every block is in the cell it
// falls in, and each cell knows its biggest block.
func TestHeapMap(t *testing.T) {
	const heap, far = 0x5555_0000_0000, 0x7f00_0000_0000
	blocks := []HeapObject{
		{Addr: far, Size: 1 << 16},        // a mapped block: a region of its own
		{Addr: heap + 0x40, Size: 0x20},   // cell 0
		{Addr: heap + 0x10, Size: 0x10},   // cell 0, the region's start
		{Addr: heap + 0x200, Size: 0x300}, // from cell 0 over two more
		{Addr: heap + 0x1000, Size: 0},    // a block of 0 bytes
	}
	hm := mapBlocks(blocks, 70)
	if len(hm.Regions) != 2 || hm.Regions[0].Start != heap+0x10 || hm.Regions[0].End != heap+0x1001 || hm.Regions[1].Start != far {
		t.Fatalf("regions %+v", hm.Regions)
	}
	// Span 0xff1 + 0x10000 bytes in about 70 cells: 0x3f0 bytes a cell,
	// rounded up to 16.
	if hm.CellBytes != 0x3f0 {
		t.Fatalf("cells of %#x bytes, want 0x3f0", hm.CellBytes)
	}
	if want := 5 + 66; len(hm.Cells) != want {
		t.Errorf("%d cells, want %d (5 for the heap, 66 for the mapped block)", len(hm.Cells), want)
	}
	var used, count uint64
	for _, c := range hm.Cells {
		used += c.Used
		count += c.Blocks
		if c.Used > hm.CellBytes {
			t.Errorf("a cell holds %d bytes, more than its %d", c.Used, hm.CellBytes)
		}
	}
	if used != 1<<16+0x20+0x10+0x300 || count != 5 {
		t.Errorf("the cells hold %#x bytes in %d blocks, want all the blocks' bytes in 5", used, count)
	}
	first := hm.Cells[0]
	if first.Blocks != 3 || first.Biggest.Addr != heap+0x200 || first.Used != 0x10+0x20+(0x3f0-0x1f0) {
		t.Errorf("the first cell: %d blocks, the biggest at %#x, %#x bytes used", first.Blocks, first.Biggest.Addr, first.Used)
	}
	if c := hm.Cells[hm.Regions[1].FirstCell]; c.Blocks != 1 || c.Used != hm.CellBytes || c.Biggest.Size != 1<<16 {
		t.Errorf("the mapped block's first cell: %+v", c)
	}
	if empty := mapBlocks(nil, 100); len(empty.Cells) != 0 || len(empty.Regions) != 0 {
		t.Errorf("no blocks: %+v", empty)
	}
}
