package analysis

import (
	"container/heap"
	"slices"
)

// topObjects keeps the n objects that rank highest by a key, in memory
// bounded by n however many are offered: a min-heap whose root is the
// lowest kept, which a better object replaces.
type topObjects struct {
	n    int
	by   objectKey
	end  uint64 // for byAge: the time ages are counted to
	objs []HeapObject
}

// objectKey is what topObjects ranks objects by. (A key function would
// make every object offered escape to the heap: a free is offered one.)
type objectKey int

const (
	bySize objectKey = iota
	byAge            // how long it lived, or has lived by end
)

func (t *topObjects) key(o *HeapObject) uint64 {
	if t.by == bySize {
		return o.Size
	}
	return o.Age(t.end)
}

func (t *topObjects) Len() int { return len(t.objs) }
func (t *topObjects) Less(i, j int) bool {
	return t.before(&t.objs[j], &t.objs[i]) // the root is the one ranked last
}
func (t *topObjects) Swap(i, j int) { t.objs[i], t.objs[j] = t.objs[j], t.objs[i] }
func (t *topObjects) Push(x any)    { t.objs = append(t.objs, x.(HeapObject)) }
func (t *topObjects) Pop() any {
	o := t.objs[len(t.objs)-1]
	t.objs = t.objs[:len(t.objs)-1]
	return o
}

// before reports whether a ranks before b: a higher key, then the earlier
// allocation, then the lower address, so that the lists are the same from
// run to run.
func (t *topObjects) before(a, b *HeapObject) bool {
	if ka, kb := t.key(a), t.key(b); ka != kb {
		return ka > kb
	}
	if a.Allocated != b.Allocated {
		return a.Allocated < b.Allocated
	}
	return a.Addr < b.Addr
}

// shorter reports whether an object of this age ranks after all the n
// kept by age, so that offering it is no use.
func (t *topObjects) shorter(age uint64) bool {
	return len(t.objs) == t.n && (t.n <= 0 || age < t.key(&t.objs[0]))
}

// offer keeps o if it ranks among the n best so far.
func (t *topObjects) offer(o HeapObject) {
	if t.n <= 0 {
		return
	}
	if len(t.objs) < t.n {
		heap.Push(t, o)
		return
	}
	if t.before(&o, &t.objs[0]) {
		t.objs[0] = o
		heap.Fix(t, 0)
	}
}

// sorted returns the objects kept, best first.
func (t *topObjects) sorted() []HeapObject {
	objs := slices.Clone(t.objs)
	slices.SortFunc(objs, func(a, b HeapObject) int {
		switch {
		case t.before(&a, &b):
			return -1
		case t.before(&b, &a):
			return 1
		}
		return 0
	})
	return objs
}
