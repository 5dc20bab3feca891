package trace

import "math/bits"

// divider divides by a constant without a division instruction, which
// takes dozens of cycles: the Writer divides every event's time by the
// time unit. It uses the round-up method of Granlund and Montgomery,
// "Division by invariant integers using multiplication" (1994), figure
// 4.1, exact for every 64-bit dividend:
//
//  1. l = ceil(log2(d)), and m = floor(2^64 * (2^l - d) / d) + 1, which
//     fits in 64 bits.
//  2. n / d = (t + (n-t)/2) >> (l-1), where t is the high half of m * n.
//
// Divisors of 1 and above 2^63 (where the quotient is 0 or 1) are handled
// apart.
type divider struct {
	d, m  uint64
	shift uint // l - 1
}

func newDivider(d uint64) divider {
	if d <= 1 || d > 1<<63 {
		return divider{d: d}
	}
	l := uint(bits.Len64(d - 1))
	q, _ := bits.Div64(uint64(1)<<l-d, 0, d)
	return divider{d: d, m: q + 1, shift: l - 1}
}

func (v divider) div(n uint64) uint64 {
	switch {
	case v.m != 0:
		t, _ := bits.Mul64(v.m, n)
		return (t + (n-t)>>1) >> v.shift
	case v.d <= 1:
		return n
	case n >= v.d:
		return 1
	}
	return 0
}
