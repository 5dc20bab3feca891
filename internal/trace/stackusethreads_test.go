package trace

import (
	"math/rand/v2"
	"testing"
)

// TestStackUseThreads switches the stack-use predictor between threads at
// random, a few per block and then many, past maxScannedThreads, and
// compares what each thread's previous event used with a plain map.
func TestStackUseThreads(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var p stackUsePredictor // never reset: the first block of a Reader's decoder
	for block := range 40 {
		if block > 0 {
			p.reset()
		}
		threads := 1 + rng.IntN(3*maxScannedThreads)
		want := map[threadKey]uint64{}
		cur := threadKey{}
		for i := range 2000 {
			k := threadKey{uint64(rng.IntN(2)), uint64(rng.IntN(threads))}
			if rng.IntN(50) == 0 {
				k = threadKey{} // the thread before any Context record
			}
			p.context(k.process, k.thread)
			if p.prev != want[k] {
				t.Fatalf("block %d, switch %d to %v from %v: prev %d, want %d", block, i, k, cur, p.prev, want[k])
			}
			cur = k
			use := rng.Uint64()
			p.update(k.process, 0, use)
			want[k] = use
		}
	}
}
