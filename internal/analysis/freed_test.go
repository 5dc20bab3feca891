package analysis

import "testing"

// The memory of freed blocks is bounded: once full, it forgets the oldest
// free, and an address allocated again is forgotten at once.
func TestFreedBlocksBounded(t *testing.T) {
	var h heapTable
	allocFree := func(addr, freeStack uint64) {
		t.Helper()
		h.put(addr, block{size: addr, bornClock: 1})
		if _, live, _, _ := h.free(addr, freeStack); !live {
			t.Fatalf("the block at %d was not live", addr)
		}
	}
	for addr := uint64(1); addr <= maxFreed+10; addr++ {
		allocFree(addr, addr)
	}
	if h.blocks.len() != maxFreed || len(h.ring) != maxFreed {
		t.Fatalf("remembers %d blocks in a ring of %d, want %d", h.blocks.len(), len(h.ring), maxFreed)
	}
	for _, addr := range []uint64{1, 10} {
		if _, _, _, wasFreed := h.free(addr, 0); wasFreed {
			t.Errorf("still remembers %d, one of the 10 oldest", addr)
		}
	}
	if _, _, b, wasFreed := h.free(11, 0); !wasFreed || b.freeStack != 11 || b.size != 11 {
		t.Errorf("free(11) = %+v, %v; want the first free of 11", b, wasFreed)
	}

	// 20 is allocated and freed again. Its new entry takes the oldest
	// slot; its old slot is stale, and must not make it forgotten when
	// its turn comes.
	allocFree(20, 120)
	for addr := uint64(maxFreed + 11); addr < maxFreed+20; addr++ {
		allocFree(addr, 0)
	}
	if _, _, b, wasFreed := h.free(20, 0); !wasFreed || b.freeStack != 120 {
		t.Errorf("free(20) = %+v, %v; want the second free of 20", b, wasFreed)
	}
	if _, _, _, wasFreed := h.free(19, 0); wasFreed {
		t.Errorf("still remembers 19, freed before 20 was freed again")
	}

	// A block allocated over a live one replaces it; over a freed one,
	// it does not.
	h.put(5, block{size: 5, bornClock: 1})
	if _, replaced := h.put(11, block{size: 11}); replaced {
		t.Errorf("put over a freed block replaced it")
	}
	if old, replaced := h.put(5, block{size: 6}); !replaced || old.size != 5 {
		t.Errorf("put over a live block: %+v, %v; want it replaced", old, replaced)
	}
}
