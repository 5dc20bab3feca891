package analysis

import "math/bits"

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

// lifetimeBucket returns the bucket of an object that lived ns
// nanoseconds, in a trace whose time unit is unit ns.
func lifetimeBucket(ns, unit uint64) int {
	if ns < unit {
		return 0 // most lifetimes, without a division
	}
	return log4Bucket(ns / max(unit, 1))
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
	return min((bits.Len64(v)+1)/2, LifetimeBuckets-1)
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
