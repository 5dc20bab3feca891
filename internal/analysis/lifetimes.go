package analysis

import "math/bits"

// LifetimeBuckets is the number of buckets of a lifetime histogram.
//
// Lifetimes in time: bucket 0 holds the objects freed within the trace's
// time unit of their allocation (their lifetime reads as 0), bucket i ≥ 1
// those that lived from 4^(i-1) to 4^i - 1 µs (1–3 µs, 4–15 µs, …, 1–4.2 s
// for i = 11), and the last bucket everything longer.
//
// Lifetimes in allocations (how many allocations of the process came in
// between, a clock that does not depend on the time unit): bucket 0 holds
// the temporary allocations (none came between), bucket i ≥ 1 those with
// 4^(i-1) to 4^i - 1 between.
const LifetimeBuckets = 20

// LifetimeBucket returns the bucket of an object that lived ns nanoseconds.
func LifetimeBucket(ns uint64) int { return log4Bucket(ns / 1000) }

// AllocsBucket returns the bucket of an object with n allocations between
// its allocation and its free.
func AllocsBucket(n uint64) int { return log4Bucket(n) }

// log4Bucket returns 0 for 0, and i for 4^(i-1) ≤ v < 4^i, capped at the
// last bucket.
func log4Bucket(v uint64) int {
	if v == 0 {
		return 0
	}
	return min((bits.Len64(v)+1)/2, LifetimeBuckets-1)
}

// LifetimeBucketStart returns the shortest lifetime, in ns, of bucket i of
// a lifetime histogram in time.
func LifetimeBucketStart(i int) uint64 { return AllocsBucketStart(i) * 1000 }

// AllocsBucketStart returns the fewest allocations between of bucket i of
// a lifetime histogram in allocations.
func AllocsBucketStart(i int) uint64 {
	if i <= 0 {
		return 0
	}
	return 1 << (2 * (i - 1))
}
