package analysis

import (
	"math"
	"math/rand"
	"testing"
)

// TestLifetimeScale compares lifetimeScale.bucket with the definition it
// stands for, log4Bucket of the lifetime in time units, at random and at
// the edges of every bucket, for units small, usual, odd and huge.
func TestLifetimeScale(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	units := []uint64{0, 1, 2, 3, 1000, 1_000_000, 999_983, 1 << 40, 3 << 61, math.MaxUint64}
	for range 20 {
		units = append(units, r.Uint64()>>uint(r.Intn(64)))
	}
	for _, unit := range units {
		s := newLifetimeScale(unit)
		check := func(ns uint64) {
			t.Helper()
			if got, want := s.bucket(ns), log4Bucket(ns/max(unit, 1)); got != want {
				t.Fatalf("unit %d, %d ns: bucket %d, want %d", unit, ns, got, want)
			}
		}
		for i := range LifetimeBuckets {
			check(s.starts[i])
			check(s.starts[i] - 1)
			check(s.starts[i] + 1)
		}
		for range 2000 {
			check(r.Uint64() >> uint(r.Intn(64)))
		}
		check(0)
		check(math.MaxUint64)
	}
}
