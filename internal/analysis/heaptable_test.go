package analysis

import (
	"math/rand"
	"testing"
)

// TestHeapTableModel checks the heap table against a Go map through random
// allocations and frees as the trace Reader hands them out: blocks freed
// in their trace block by handle, those of earlier trace blocks by
// address; before an allocation over a live block of its own trace block,
// a lost free of it (by handle); allocations over blocks of earlier trace
// blocks, which the table must find itself; frees of addresses not live;
// and the address the index cannot key. Few distinct addresses collide
// often, so that probing, deletion and growth are all exercised.
func TestHeapTableModel(t *testing.T) {
	var h heapTable
	type live struct {
		size   uint64
		handle uint32 // 0 if it was allocated in an earlier trace block
	}
	want := map[uint64]live{}
	var blk uint32 = 1
	var nextHandle uint32
	r := rand.New(rand.NewSource(1))
	addrOf := func() uint64 {
		if r.Intn(500) == 0 {
			return 0
		}
		return uint64(r.Intn(3000)+1) * 16
	}
	for i := range 300000 {
		switch op := r.Intn(10); {
		case op == 0 && r.Intn(50) == 0:
			// A new trace block: handles start again.
			blk++
			nextHandle = 0
			for addr, l := range want {
				want[addr] = live{size: l.size}
			}
		case op < 4:
			addr := addrOf()
			if l, ok := want[addr]; ok && l.handle != 0 {
				if b, ok := h.take(addr, l.handle, blk); !ok || b.size != l.size {
					t.Fatalf("op %d: lost free of %#x (handle %d) took %v, want the block of size %d", i, addr, l.handle, ok, l.size)
				}
				delete(want, addr)
			}
			nextHandle++
			size := uint64(i)
			old, replaced := h.put(addr, nextHandle, blk, &block{size: size})
			l, had := want[addr]
			if replaced != had || replaced && old.size != l.size {
				t.Fatalf("op %d: put(%#x) replaced %v, want %v (size %d)", i, addr, replaced, had, l.size)
			}
			want[addr] = live{size: size, handle: nextHandle}
		default:
			// A free: by handle if the block is of this trace block, else
			// by address, of a block of an earlier one or of none.
			addr := addrOf()
			l, had := want[addr]
			b, freed := h.free(addr, l.handle, blk, 0)
			if freed != had || freed && b.size != l.size {
				t.Fatalf("op %d: free(%#x, handle %d) freed %v, want %v (size %d)", i, addr, l.handle, freed, had, l.size)
			}
			delete(want, addr)
		}
		if h.len() != len(want) {
			t.Fatalf("op %d: %d live blocks, want %d", i, h.len(), len(want))
		}
	}
	n := 0
	h.each(func(addr uint64, b block) {
		n++
		if l, ok := want[addr]; !ok || l.size != b.size {
			t.Errorf("each: block at %#x of size %d, want %d (live %v)", addr, b.size, l.size, ok)
		}
	})
	if n != len(want) {
		t.Errorf("each saw %d blocks, want %d", n, len(want))
	}
	// A clone holds the same blocks, found by address; changing it leaves
	// t alone.
	c := h.clone()
	for addr, l := range want {
		if b, ok := c.free(addr, 0, blk+1, 0); !ok || b.size != l.size {
			t.Fatalf("clone: free(%#x) = %v; want the block of size %d", addr, ok, l.size)
		}
	}
	if c.len() != 0 || h.len() != len(want) {
		t.Errorf("after freeing all of the clone: %d live in it, %d in the original; want 0 and %d", c.len(), h.len(), len(want))
	}
}
