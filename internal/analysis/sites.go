package analysis

import "slices"

// SiteOrder is a way to rank the sites of a process.
type SiteOrder int

const (
	ByPeak        SiteOrder = iota // bytes live at the peak, then blocks
	ByAllocations                  // allocations, then bytes allocated
	ByInUseAtExit                  // bytes in use at exit, then blocks
	ByTemporary                    // temporary allocations, then allocations
)

// TopSites returns the n sites of p that rank first in order, leaving out
// those with nothing to count in it (no block live at the peak for
// ByPeak, say). n <= 0 means all of them. Ties go to the lower stack ID, so
// that reports are the same from run to run.
func (p *Process) TopSites(order SiteOrder, n int) []*Site {
	var top []*Site
	for i := range p.Sites {
		if s := &p.Sites[i]; counts(s, order) {
			top = append(top, s)
		}
	}
	slices.SortFunc(top, func(a, b *Site) int {
		x, y := rank(a, order), rank(b, order)
		if c := cmpUint(y[0], x[0]); c != 0 {
			return c
		}
		if c := cmpUint(y[1], x[1]); c != 0 {
			return c
		}
		return cmpUint(a.Stack, b.Stack)
	})
	if n > 0 && len(top) > n {
		top = top[:n]
	}
	return top
}

func counts(s *Site, order SiteOrder) bool {
	switch order {
	case ByPeak:
		return s.PeakBlocks > 0
	case ByAllocations:
		return s.Allocations > 0
	case ByInUseAtExit:
		return s.InUseAtExitBlocks > 0
	case ByTemporary:
		return s.Temporary > 0
	}
	return false
}

// rank returns the keys of s in order, the first one first.
func rank(s *Site, order SiteOrder) [2]uint64 {
	switch order {
	case ByPeak:
		return [2]uint64{s.PeakBytes, s.PeakBlocks}
	case ByAllocations:
		return [2]uint64{s.Allocations, s.BytesAllocated}
	case ByInUseAtExit:
		return [2]uint64{s.InUseAtExitBytes, s.InUseAtExitBlocks}
	case ByTemporary:
		return [2]uint64{s.Temporary, s.Allocations}
	}
	return [2]uint64{}
}
