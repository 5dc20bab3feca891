package analysis

import (
	"math/rand"
	"testing"
)

// BenchmarkHeapTable frees one of 4,096 live blocks at random and
// allocates another, as the dense workload does, each by handle.
func BenchmarkHeapTable(b *testing.B) {
	const live = 4096
	var h heapTable
	r := rand.New(rand.NewSource(1))
	addrs := make([]uint64, live)
	handles := make([]uint32, live)
	for i := range addrs {
		addrs[i], handles[i] = 0x10000+uint64(i)*64, uint32(i+1)
		h.put(addrs[i], handles[i], 1, &block{size: 16})
	}
	picks := make([]int, 1<<16)
	for i := range picks {
		picks[i] = r.Intn(live)
	}
	b.ResetTimer()
	for i := range b.N {
		k := picks[i&(1<<16-1)]
		if _, live := h.free(addrs[k], handles[k], 1, 0); !live {
			b.Fatal("not live")
		}
		h.put(addrs[k], handles[k], 1, &block{size: 16})
	}
}

// BenchmarkHeapTableBigheap replays the bigheap workload's heap: 1M
// blocks allocated in ascending addresses, by handle, in trace blocks of
// 262,144 allocations; then every other one freed by address in address
// order, in later trace blocks; then the rest gone over once, as the
// report does at the end.
func BenchmarkHeapTableBigheap(b *testing.B) {
	const (
		n        = 1 << 20
		perBlock = 1 << 18
	)
	sizes := [...]uint64{16, 24, 32, 40, 48, 56, 64}
	addrs := make([]uint64, n)
	addr := uint64(0x5555_0000_0000)
	for i := range addrs {
		addrs[i] = addr
		addr += (sizes[i%len(sizes)] + 8 + 15) &^ 15
	}
	for b.Loop() {
		var h heapTable
		for i, a := range addrs {
			h.put(a, uint32(i%perBlock+1), uint32(i/perBlock+1), &block{size: sizes[i%len(sizes)], born: uint64(i)})
		}
		blk := uint32(n/perBlock + 1)
		for i := 0; i < n; i += 2 {
			if _, live := h.free(addrs[i], 0, blk+uint32(i/perBlock), 0); !live {
				b.Fatal("not live")
			}
		}
		var live int
		h.each(func(uint64, *block) { live++ })
		if live != n/2 {
			b.Fatalf("%d live, want %d", live, n/2)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/block")
}
