package analysis

import "testing"

// TestIndexProbes checks that the address index spreads the addresses of
// arrays of equal blocks, as programs allocate them, over its slots: a
// lookup, of an address there or not, passes few other entries. (Hashing
// with the middle bits of the product put blocks 32 or 64 bytes apart
// into runs that lookups walked 30 to 50 slots of.)
func TestIndexProbes(t *testing.T) {
	for _, spacing := range []uint64{16, 32, 48, 64, 4096, 1 << 20} {
		var x addrIndex
		const n = 1 << 18
		base := uint64(0x7f00_0000_0000)
		for i := range uint64(n) {
			if x.full() {
				x.grow()
			}
			x.put(base+i*spacing, uint32(i))
		}
		var passed, passedAbsent int
		const lookups = 20000
		for i := range uint64(lookups) {
			addr := base + (i*97%n)*spacing
			j := x.home(addr)
			for ; x.entries[j].key != addr; j = (j + 1) & x.mask {
				passed++
			}
			if x.entries[j].ref != uint32(i*97%n) {
				t.Fatalf("spacing %d: the entry of %#x has ref %d", spacing, addr, x.entries[j].ref)
			}
			for j := x.home(addr + 8); x.entries[j].key != 0; j = (j + 1) & x.mask {
				passedAbsent++
			}
		}
		if mean, meanAbsent := float64(passed)/lookups, float64(passedAbsent)/lookups; mean > 4 || meanAbsent > 4 {
			t.Errorf("blocks %d bytes apart: lookups pass %.1f entries on average (%.1f for absent addresses), want at most 4",
				spacing, mean, meanAbsent)
		}
	}
}
