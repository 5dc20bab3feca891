package analysis

import (
	"fmt"
	"strings"
)

// Cost is a measure of what the allocations of a call stack cost, by
// which trees, call graphs and flame graphs weigh stacks: heaptrack's
// costs.
type Cost int

const (
	CostAllocations Cost = iota // allocations made
	CostAllocated               // bytes allocated
	CostPeak                    // bytes live at the peak
	CostLeaked                  // bytes still in use at exit (at the end of the window)
	CostTemporary               // temporary allocations

	numCosts
)

var costNames = [numCosts]string{"allocations", "allocated", "peak", "leaked", "temporary"}

func (c Cost) String() string {
	if c >= 0 && c < numCosts {
		return costNames[c]
	}
	return fmt.Sprintf("Cost(%d)", int(c))
}

// IsBytes reports whether the cost counts bytes rather than allocations.
func (c Cost) IsBytes() bool { return c == CostAllocated || c == CostPeak || c == CostLeaked }

// Of returns the cost of site s.
func (c Cost) Of(s *Site) uint64 {
	switch c {
	case CostAllocations:
		return s.Allocations
	case CostAllocated:
		return s.BytesAllocated
	case CostPeak:
		return s.PeakBytes
	case CostLeaked:
		return s.InUseAtExitBytes
	case CostTemporary:
		return s.Temporary
	}
	return 0
}

// ParseCost returns the cost named s.
func ParseCost(s string) (Cost, error) {
	for i, name := range costNames {
		if s == name {
			return Cost(i), nil
		}
	}
	return 0, fmt.Errorf("unknown cost %q (costs: %s)", s, strings.Join(costNames[:], ", "))
}
