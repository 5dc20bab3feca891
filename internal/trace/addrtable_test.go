package trace

import (
	"math/rand/v2"
	"testing"
)

// TestAddrTable checks the table against a map through many inserts and
// removes, with addresses that collide in the table's home slots.
func TestAddrTable(t *testing.T) {
	var table addrTable
	want := map[uint64]uint32{} // num
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 200000 {
		addr := uint64(rng.IntN(5000)) * 16
		if rng.IntN(3) == 0 {
			addr <<= 20 // far apart, for other home slots
		}
		if rng.IntN(2) == 0 {
			num := uint32(i + 1)
			table.set(addr, num)
			want[addr] = num
		} else {
			if num := take(&table, addr); num != want[addr] {
				t.Fatalf("step %d: take(%#x) = %d, want %d", i, addr, num, want[addr])
			}
			delete(want, addr)
		}
		if table.used != len(want) {
			t.Fatalf("step %d: table holds %d addresses, want %d", i, table.used, len(want))
		}
		if i%50000 == 0 {
			table.reset()
			clear(want)
		}
	}
	for addr, num := range want {
		if got := take(&table, addr); got != num {
			t.Fatalf("take(%#x) = %d at the end, want %d", addr, got, num)
		}
	}
}

// take removes addr from the table and returns the handle it held, 0 if
// it was not there.
func take(table *addrTable, addr uint64) uint32 {
	i, s := table.find(addr)
	if s == nil {
		return 0
	}
	num := s.num
	table.remove(i)
	return num
}

// TestAddrTableGenerations empties a table more times than it has
// generations: nothing from before comes back.
func TestAddrTableGenerations(t *testing.T) {
	var table addrTable
	for i := range 1<<16 + 10 {
		if _, s := table.find(16); s != nil {
			t.Fatalf("reset %d: the table still held an address", i)
		}
		table.set(16, uint32(i+1))
		table.set(uint64(i)*16+32, 1)
		table.reset()
	}
}

// BenchmarkAddrTable compares the table with a Go map on what the Writer
// does on a malloc-dense loop: take the address of a random live block,
// put a new one.
func BenchmarkAddrTable(b *testing.B) {
	const live = 4096
	rng := rand.New(rand.NewPCG(7, 8))
	addrs := make([]uint64, 1<<16)
	for i := range addrs {
		addrs[i] = 0x5555_5555_0000 + uint64(rng.IntN(1<<16))*16
	}
	b.Run("table", func(b *testing.B) {
		var table addrTable
		var slots [live]uint64
		i := 0
		for b.Loop() {
			s := i % live
			take(&table, slots[s])
			slots[s] = addrs[i&(len(addrs)-1)]
			table.set(slots[s], uint32(i+1))
			i++
		}
	})
	b.Run("map", func(b *testing.B) {
		m := map[uint64]uint32{}
		var slots [live]uint64
		i := 0
		for b.Loop() {
			s := i % live
			delete(m, slots[s])
			slots[s] = addrs[i&(len(addrs)-1)]
			m[slots[s]] = uint32(i + 1)
			i++
		}
	})
}
