package analysis

import (
	"math/rand"
	"testing"
)

// TestAddrMap checks the map against Go's through random operations, many
// of them on colliding keys, so that deletion's shifting is exercised.
func TestAddrMap(t *testing.T) {
	var m addrMap[int]
	want := map[uint64]int{}
	r := rand.New(rand.NewSource(1))
	for i := range 200000 {
		// Few distinct keys, multiples of 16 like heap addresses.
		addr := uint64(r.Intn(3000)+1) * 16
		switch r.Intn(4) {
		case 0:
			m.put(addr, i)
			want[addr] = i
		case 1:
			// entry adds a zero value when the key is new.
			v, existed := m.entry(addr)
			if _, had := want[addr]; existed != had {
				t.Fatalf("entry(%#x) existed %v, want %v", addr, existed, had)
			}
			*v = i
			want[addr] = i
		case 2, 3:
			m.remove(addr)
			delete(want, addr)
		}
		if i%1000 == 0 {
			if m.len() != len(want) {
				t.Fatalf("after %d operations: %d entries, want %d", i, m.len(), len(want))
			}
			for k, v := range want {
				if got := m.find(k); got == nil || *got != v {
					t.Fatalf("after %d operations: find(%#x) = %v; want %d", i, k, got, v)
				}
			}
		}
	}
	n := 0
	m.each(func(addr uint64, v int) {
		n++
		if want[addr] != v {
			t.Errorf("each: %#x = %d, want %d", addr, v, want[addr])
		}
	})
	if n != len(want) {
		t.Errorf("each saw %d entries, want %d", n, len(want))
	}
	if m.find(0x7777770) != nil {
		t.Error("find of a key never put")
	}
}
