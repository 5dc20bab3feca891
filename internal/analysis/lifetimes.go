package analysis

import (
	"math"
	"math/bits"
)

// LifetimeBuckets is the number of buckets of a lifetime histogram.
//
// Lifetimes in time are counted in the trace's time unit (Info.TimeUnit),
// below which a trace cannot tell times apart: bucket 0 holds the objects
// freed within one unit of their allocation (their lifetime reads as 0),
// bucket i ≥ 1 those that lived from 4^(i-1) to 4^i - 1 units (1–3 ms,
// 4–15 ms, … at the default unit of 1 ms), and the last bucket everything
// longer.
//
// Lifetimes in allocations (how many allocations of the process came in
// between, a clock that does not depend on the time unit): bucket 0 holds
// the temporary allocations (none came between), bucket i ≥ 1 those with
// 4^(i-1) to 4^i - 1 between.
const LifetimeBuckets = 24

// lifetimeScale finds the bucket of an object that lived ns nanoseconds,
// in a trace whose time unit is unit ns, as log4Bucket(ns / unit) does but
// without the division, which costs as much as the rest of a free:
//
//  1. ns / unit is at least 1 (else the bucket is 0) and has Len64(ns) -
//     Len64(unit) bits, or one more;
//  2. so its bucket is one of two, next to each other;
//  3. the higher one if ns reaches that bucket's start times unit.
type lifetimeScale struct {
	unit    uint64
	unitLen int
	// starts[i] is the least lifetime of bucket i in ns: BucketStart(i)
	// times unit, or MaxUint64 if that does not fit in 64 bits (bucket
	// never asks for one of those: the start of the higher of its two is
	// below 2^Len64(ns)).
	starts [LifetimeBuckets]uint64
}

func newLifetimeScale(unit uint64) lifetimeScale {
	unit = max(unit, 1)
	s := lifetimeScale{unit: unit, unitLen: bits.Len64(unit)}
	for i := range LifetimeBuckets {
		s.starts[i] = math.MaxUint64
		if hi, lo := bits.Mul64(unit, BucketStart(i)); hi == 0 {
			s.starts[i] = lo
		}
	}
	return s
}

// bucket returns the bucket of an object that lived ns nanoseconds.
func (s *lifetimeScale) bucket(ns uint64) int {
	if ns < s.unit {
		return 0 // most lifetimes
	}
	// Unsigned, so that the halves are shifts: ns ≥ unit, so d ≥ 0.
	d := uint(bits.Len64(ns) - s.unitLen)
	low, high := min((d+1)/2, LifetimeBuckets-1), min((d+2)/2, LifetimeBuckets-1)
	if high != low && ns >= s.starts[high] {
		return int(high)
	}
	return int(low)
}

// allocsBucket returns the bucket of an object with n allocations between
// its allocation and its free.
func allocsBucket(n uint64) int { return log4Bucket(n) }

// log4Bucket returns 0 for 0, and i for 4^(i-1) ≤ v < 4^i, capped at the
// last bucket.
func log4Bucket(v uint64) int {
	if v == 0 {
		return 0
	}
	return int(min(uint(bits.Len64(v)+1)/2, LifetimeBuckets-1))
}

// BucketStart returns the least value of bucket i of a lifetime
// histogram: in time units for lifetimes in time, in allocations for
// lifetimes in allocations.
func BucketStart(i int) uint64 {
	if i <= 0 {
		return 0
	}
	return 1 << (2 * (i - 1))
}
