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
