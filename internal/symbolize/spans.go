package symbolize

import (
	"cmp"
	"slices"
	"sort"
)

// A span is a half-open address range [lo, hi) tagged with the index of
// what covers it: a compilation unit, a function, a line sequence, a symbol.
type span struct {
	lo, hi uint64
	id     int32
}

// spanIndex answers "which span containing addr starts last?" in
// logarithmic time for disjoint or properly nested spans, which is what
// compilers emit. Overlapping spans still give a correct answer, only more
// slowly.
type spanIndex struct {
	spans []span   // sorted by lo, outer spans first on equal lo
	maxHi []uint64 // maxHi[i] is the largest hi among spans[:i+1]
}

// newSpanIndex sorts spans (empty ones are dropped) and indexes them.
func newSpanIndex(spans []span) spanIndex {
	kept := spans[:0]
	for _, s := range spans {
		if s.lo < s.hi {
			kept = append(kept, s)
		}
	}
	slices.SortFunc(kept, func(a, b span) int {
		switch {
		case a.lo != b.lo:
			return cmp.Compare(a.lo, b.lo)
		case a.hi != b.hi:
			return cmp.Compare(b.hi, a.hi)
		default:
			return int(a.id) - int(b.id)
		}
	})
	maxHi := make([]uint64, len(kept))
	var top uint64
	for i, s := range kept {
		top = max(top, s.hi)
		maxHi[i] = top
	}
	return spanIndex{spans: slices.Clip(kept), maxHi: maxHi}
}

// find returns the id of the span that contains addr and starts last
// (the innermost one when spans nest), or -1.
func (x *spanIndex) find(addr uint64) int32 {
	i := sort.Search(len(x.spans), func(i int) bool { return x.spans[i].lo > addr }) - 1
	// Walk back while some earlier span may still reach addr.
	for ; i >= 0 && x.maxHi[i] > addr; i-- {
		if x.spans[i].hi > addr {
			return x.spans[i].id
		}
	}
	return -1
}
