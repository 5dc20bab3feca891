package analysis

import (
	"math/rand"
	"slices"
	"testing"
)

// TestSortSites checks that sortSites, which moves the sites in place,
// puts them in order (the process's own by stack, then the inherited) and
// says where each went, on random sets with cycles of every length.
func TestSortSites(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	for _, n := range []int{0, 1, 2, 3, 10, 1000} {
		for range 20 {
			sites := make([]Site, n)
			for i, stack := range r.Perm(n) {
				sites[i] = Site{Stack: uint64(stack), Inherited: r.Intn(4) == 0, Allocations: uint64(i)}
			}
			before := slices.Clone(sites)
			newIndex := sortSites(sites)
			for from, to := range newIndex {
				if sites[to] != before[from] {
					t.Fatalf("%d sites: site %d went to %d, which holds %+v", n, from, to, sites[to])
				}
			}
			if !slices.IsSortedFunc(sites, func(a, b Site) int {
				if a.Inherited != b.Inherited {
					if a.Inherited {
						return 1
					}
					return -1
				}
				return cmpUint(a.Stack, b.Stack)
			}) {
				t.Fatalf("%d sites out of order: %+v", n, sites)
			}
		}
	}
}
