package analysis

import (
	"math/rand"
	"slices"
	"testing"
)

// TestTopObjects checks the kept objects against a sort of all of them,
// with many ties of key and of allocation time, offered in rising,
// falling and random order, every other one offered whole and the others
// written where place says.
func TestTopObjects(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, n := range []int{0, 1, 7, 100} {
		for _, order := range []string{"rising", "falling", "random"} {
			all := make([]HeapObject, 5000)
			for i := range all {
				all[i] = HeapObject{Addr: uint64(r.Intn(64)) * 16, Allocated: uint64(r.Intn(50)), Size: uint64(r.Intn(300))}
				all[i].Freed = all[i].Allocated + uint64(r.Intn(40))
			}
			for _, by := range []objectKey{bySize, byAge} {
				top := topObjects{n: n, by: by}
				switch order {
				case "rising":
					slices.SortStableFunc(all, func(a, b HeapObject) int { return cmpUint(top.key(&a), top.key(&b)) })
				case "falling":
					slices.SortStableFunc(all, func(a, b HeapObject) int { return cmpUint(top.key(&b), top.key(&a)) })
				}
				for i, o := range all {
					if i%2 == 0 {
						top.offer(o)
					} else if p := top.place(top.key(&o)); p != nil {
						*p = o
					}
				}
				want := slices.Clone(all)
				slices.SortFunc(want, top.compare)
				got := top.sorted()
				for i := range min(n, len(want)) {
					if i >= len(got) || top.key(&got[i]) != top.key(&want[i]) || got[i].Allocated != want[i].Allocated || got[i].Addr != want[i].Addr {
						t.Fatalf("n %d, %s, by %d: object %d of %d kept is %+v, want %+v", n, order, by, i, len(got), got[min(i, len(got)-1)], want[i])
					}
				}
				if len(got) != min(n, len(want)) {
					t.Fatalf("n %d, %s: %d kept, want %d", n, order, len(got), min(n, len(want)))
				}
			}
		}
	}
}

// TestTopObjectsPlaceUnique checks placeUnique, which leaves out the
// objects that tie with the bar on their key but rank after it, against a
// sort of all of them: live blocks of a few sizes and allocation times,
// each at its own address, offered in address order and at random.
func TestTopObjectsPlaceUnique(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for _, n := range []int{1, 7, 100} {
		for _, shuffled := range []bool{false, true} {
			all := make([]HeapObject, 20000)
			for i := range all {
				all[i] = HeapObject{Addr: 0x1000 + uint64(i)*16, Allocated: uint64(r.Intn(300)), Size: uint64(16 + 8*r.Intn(7))}
			}
			if shuffled {
				r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
			}
			for _, by := range []objectKey{bySize, byAge} {
				top := topObjects{n: n, by: by, end: 400}
				for _, o := range all {
					if p := top.placeUnique(top.key(&o), o.Allocated, o.Addr); p != nil {
						*p = o
					}
				}
				want := slices.Clone(all)
				slices.SortFunc(want, top.compare)
				want = want[:n]
				if got := top.sorted(); !slices.Equal(got, want) {
					t.Fatalf("n %d, shuffled %v, by %d: kept %v, want %v", n, shuffled, by, got, want)
				}
			}
		}
	}
}

// TestTopObjectsPlaceFreed checks placeFreed, which leaves out the freed
// objects of a key over 0 that tie with the bar but rank after it,
// against a sort of all of them: lifetimes of a few time units, many of
// them 0, and blocks at a few addresses, so that objects tie on all three,
// offered in rising, falling and random order.
func TestTopObjectsPlaceFreed(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, n := range []int{1, 7, 100} {
		for _, order := range []string{"rising", "falling", "random"} {
			all := make([]HeapObject, 20000)
			for i := range all {
				all[i] = HeapObject{Addr: uint64(r.Intn(32)) * 16, Allocated: 1 + uint64(r.Intn(60)), Size: uint64(i)}
				if r.Intn(2) == 0 {
					all[i].Freed = all[i].Allocated + uint64(r.Intn(5))
				} else {
					all[i].Freed = all[i].Allocated
				}
			}
			top := topObjects{n: n, by: byAge}
			switch order {
			case "rising":
				slices.SortStableFunc(all, func(a, b HeapObject) int { return cmpUint(top.key(&a), top.key(&b)) })
			case "falling":
				slices.SortStableFunc(all, func(a, b HeapObject) int { return cmpUint(top.key(&b), top.key(&a)) })
			}
			placed, placedAll := 0, 0
			every := topObjects{n: n, by: byAge} // place keeps every tie
			for _, o := range all {
				if p := top.placeFreed(top.key(&o), o.Allocated, o.Addr); p != nil {
					*p = o
					placed++
				}
				if p := every.place(every.key(&o)); p != nil {
					*p = o
					placedAll++
				}
			}
			want := slices.Clone(all)
			slices.SortFunc(want, top.compare)
			got := top.sorted()
			if len(got) != n {
				t.Fatalf("n %d, %s: %d kept, want %d", n, order, len(got), n)
			}
			for i := range got {
				if top.key(&got[i]) != top.key(&want[i]) || got[i].Allocated != want[i].Allocated || got[i].Addr != want[i].Addr {
					t.Fatalf("n %d, %s: object %d kept is %+v, want %+v", n, order, i, got[i], want[i])
				}
			}
			if order == "random" && placed >= placedAll {
				t.Errorf("n %d: %d objects placed, %d by place: the ties of the bar were not left out", n, placed, placedAll)
			}
		}
	}
}
