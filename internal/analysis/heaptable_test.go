package analysis

import (
	"math/rand"
	"testing"
)

// TestHeapTableModel checks the heap table against a Go map through random
// allocations and frees as a trace makes them: blocks freed in their trace
// block by handle, the others by address, allocations over live blocks
// (lost frees), frees of addresses not live, handles that name no live
// block, and the two addresses the index cannot key. Few distinct
// addresses collide often, so that probing, tombstones and rebuilds are
// all exercised.
func TestHeapTableModel(t *testing.T) {
	var h heapTable
	want := map[uint64]uint64{} // size by address of the live blocks
	type handled struct {
		addr   uint64
		handle uint32
	}
	var inBlock []handled // the live blocks of the current trace block, by handle
	var blk uint32 = 1
	var nextHandle uint32
	r := rand.New(rand.NewSource(1))
	addrOf := func() uint64 {
		switch r.Intn(500) {
		case 0:
			return 0
		case 1:
			return ^uint64(0)
		}
		return uint64(r.Intn(3000)+1) * 16
	}
	for i := range 300000 {
		switch op := r.Intn(10); {
		case op == 0 && r.Intn(100) == 0:
			// A new trace block: handles start again.
			blk++
			inBlock, nextHandle = nil, 0
		case op < 4:
			addr := addrOf()
			nextHandle++
			size := uint64(i)
			old, replaced := h.put(addr, nextHandle, blk, &block{size: size})
			oldSize, had := want[addr]
			if replaced != had || replaced && old.size != oldSize {
				t.Fatalf("op %d: put(%#x) replaced %v (size %d), want %v (size %d)", i, addr, replaced, old.size, had, oldSize)
			}
			want[addr] = size
			inBlock = append(inBlock, handled{addr, nextHandle})
		case op < 7 && len(inBlock) > 0:
			// A free by handle, of a block of this trace block (it may
			// have been replaced since: the address decides).
			k := r.Intn(len(inBlock))
			hb := inBlock[k]
			inBlock[k] = inBlock[len(inBlock)-1]
			inBlock = inBlock[:len(inBlock)-1]
			checkFree(t, &h, want, hb.addr, hb.handle, blk, i)
		default:
			// A free by address; a handle from another trace block, or
			// one never given out, must not mislead it.
			handle := uint32(0)
			if r.Intn(2) == 0 {
				handle = uint32(r.Intn(int(nextHandle)+2)) + 1
			}
			checkFree(t, &h, want, addrOf(), handle, blk+uint32(r.Intn(2)), i)
		}
		if h.len() != len(want) {
			t.Fatalf("op %d: %d live blocks, want %d", i, h.len(), len(want))
		}
	}
	n := 0
	h.each(func(addr uint64, b block) {
		n++
		if size, ok := want[addr]; !ok || size != b.size {
			t.Errorf("each: block at %#x of size %d, want %d (live %v)", addr, b.size, size, ok)
		}
	})
	if n != len(want) {
		t.Errorf("each saw %d blocks, want %d", n, len(want))
	}
	// A clone holds the same blocks and no handles; changing it leaves t
	// alone.
	c := h.clone()
	for addr, size := range want {
		if b, live := c.free(addr, 0, 0, 0); !live || b.size != size {
			t.Fatalf("clone: free(%#x) = %d, %v; want %d", addr, b.size, live, size)
		}
	}
	if c.len() != 0 || h.len() != len(want) {
		t.Errorf("after freeing all of the clone: %d live in it, %d in the original; want 0 and %d", c.len(), h.len(), len(want))
	}
}

// checkFree frees addr (with handle h of trace block blk) in the table and
// in the model, and checks that they agree.
func checkFree(t *testing.T, h *heapTable, want map[uint64]uint64, addr uint64, handle, blk uint32, op int) {
	t.Helper()
	b, live := h.free(addr, handle, blk, 0)
	size, had := want[addr]
	if live != had || live && b.size != size {
		t.Fatalf("op %d: free(%#x, handle %d) freed %v (size %d), want %v (size %d)", op, addr, handle, live, b.size, had, size)
	}
	delete(want, addr)
}
