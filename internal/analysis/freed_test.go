package analysis

import "testing"

// The frees remembered are the latest maxFreed; a second free of an
// address freed, allocated and freed again names its latest free; an
// address allocated over a live block replaces it.
func TestFreedBlocksBounded(t *testing.T) {
	var h heapTable
	allocFree := func(addr, freeStack uint64) {
		t.Helper()
		if _, replaced := h.put(addr, 0, 0, &block{size: addr}); replaced {
			t.Fatalf("the block at %d replaced a live one", addr)
		}
		if _, live := h.free(addr, 0, 0, freeStack); !live {
			t.Fatalf("the block at %d was not live", addr)
		}
	}
	// badFree frees an address not live, and returns what the table
	// remembers of it.
	badFree := func(addr uint64) (freedBlock, bool) {
		t.Helper()
		if _, live := h.free(addr, 0, 0, 0); live {
			t.Fatalf("the block at %d was live", addr)
		}
		return h.lookup(addr)
	}
	for addr := uint64(1); addr <= maxFreed+10; addr++ {
		allocFree(addr, addr)
	}
	if h.len() != 0 || len(h.ring) != maxFreed {
		t.Fatalf("%d live blocks and a ring of %d, want 0 and %d", h.len(), len(h.ring), maxFreed)
	}
	for _, addr := range []uint64{1, 10} {
		if _, wasFreed := badFree(addr); wasFreed {
			t.Errorf("still remembers %d, one of the 10 oldest", addr)
		}
	}
	if b, wasFreed := badFree(11); !wasFreed || b.freeStack != 11 || b.size != 11 {
		t.Errorf("free(11) = %+v, %v; want the first free of 11", b, wasFreed)
	}
	if _, wasFreed := badFree(1 << 40); wasFreed {
		t.Errorf("an address never freed was")
	}

	// 20 is allocated and freed again: a third free names the second.
	allocFree(20, 120)
	if b, wasFreed := badFree(20); !wasFreed || b.freeStack != 120 {
		t.Errorf("free(20) = %+v, %v; want the second free of 20", b, wasFreed)
	}
	// Once the ring has gone round again, neither free of 20 is there.
	for addr := uint64(1 << 20); addr < 1<<20+maxFreed; addr++ {
		allocFree(addr, 0)
	}
	if _, wasFreed := badFree(20); wasFreed {
		t.Errorf("still remembers 20 after %d more frees", maxFreed)
	}

	h.put(5, 0, 0, &block{size: 5})
	if old, replaced := h.put(5, 0, 0, &block{size: 6}); !replaced || old.size != 5 {
		t.Errorf("put over a live block: %+v, %v; want it replaced", old, replaced)
	}
}

// The Bloom filter holds what it is given, and not much else.
func TestBloom(t *testing.T) {
	var f bloom
	var ring []freedAt
	for i := range uint64(maxFreed) {
		ring = append(ring, freedAt{addr: 0x7f0000000000 + i*48})
	}
	f.reset(ring)
	for _, e := range ring {
		if !f.mayHave(e.addr) {
			t.Fatalf("lost %#x", e.addr)
		}
	}
	false_ := 0
	for i := range uint64(100000) {
		if f.mayHave(0x5500000000 + i*32) {
			false_++
		}
	}
	if false_ > 2000 {
		t.Errorf("%d of 100,000 addresses not added seem to be there", false_)
	}
}
