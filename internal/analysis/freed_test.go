package analysis

import "testing"

// The memory of freed blocks is bounded: once full, it forgets the oldest
// free, and an address allocated again is forgotten at once.
func TestFreedBlocksBounded(t *testing.T) {
	var f freedBlocks
	for addr := uint64(1); addr <= maxFreed+10; addr++ {
		f.add(addr, freedBlock{freeStack: addr})
	}
	if f.byAddr.len() != maxFreed || len(f.ring) != maxFreed {
		t.Fatalf("remembers %d blocks in a ring of %d, want %d", f.byAddr.len(), len(f.ring), maxFreed)
	}
	for _, addr := range []uint64{1, 10} {
		if _, ok := f.lookup(addr); ok {
			t.Errorf("still remembers %d, one of the 10 oldest", addr)
		}
	}
	if b, ok := f.lookup(11); !ok || b.freeStack != 11 {
		t.Errorf("lookup(11) = %+v, %v; want the free of 11", b, ok)
	}

	// 20 is allocated and freed again. Its new entry takes the oldest
	// slot; its old slot is stale, and must not make it forgotten when
	// its turn comes.
	f.forget(20)
	f.add(20, freedBlock{freeStack: 120})
	for addr := uint64(maxFreed + 11); addr < maxFreed+20; addr++ {
		f.add(addr, freedBlock{})
	}
	if b, ok := f.lookup(20); !ok || b.freeStack != 120 {
		t.Errorf("lookup(20) = %+v, %v; want the second free of 20", b, ok)
	}
	if _, ok := f.lookup(19); ok {
		t.Errorf("still remembers 19, freed before 20 was freed again")
	}
}
