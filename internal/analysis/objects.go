package analysis

import "slices"

// topObjects keeps the n objects that rank highest by a key, in memory
// bounded by n however many are offered. Offers go into a buffer of four
// times n; when it is full, a selection keeps the best n, and the lowest
// key of those is the bar an object must reach to be offered at all
// (shorter). That costs a few comparisons per offer where a heap of the n
// best would move objects on every one: the frees of python3's exit, each
// older than the one before, made that heap 12% of the replay.
type topObjects struct {
	n    int
	by   objectKey
	end  uint64 // for byAge: the time ages are counted to
	objs []HeapObject
	// bar is the lowest key of the n kept when the buffer was last cut,
	// if cut is set.
	bar uint64
	cut bool
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

// offer keeps o if it may rank among the n best.
func (t *topObjects) offer(o HeapObject) {
	if p := t.place(t.key(&o)); p != nil {
		*p = o
	}
}

// place returns where to keep an object of key k if it may rank among the
// n best, else nil. The caller writes the object there field by field: an
// object built apart and copied in is read back 16 bytes at a time while
// its 8-byte writes are under way, and the CPU waits for them.
func (t *topObjects) place(k uint64) *HeapObject {
	// Small enough to inline: most offers stop here.
	if t.cut && k < t.bar || t.n <= 0 {
		return nil
	}
	return t.add()
}

// add returns where to keep one more object.
func (t *topObjects) add() *HeapObject {
	// The buffer grows as objects come (a run may have fewer than n):
	// its memory follows the objects, not the n asked for.
	if len(t.objs) >= 4*t.n {
		t.keepBest()
	}
	t.objs = append(t.objs, HeapObject{})
	return &t.objs[len(t.objs)-1]
}

// keepBest cuts the buffer to the n best.
func (t *topObjects) keepBest() {
	if len(t.objs) <= t.n {
		return
	}
	t.selectBest(t.n)
	t.objs = t.objs[:t.n]
	t.bar, t.cut = t.key(&t.objs[0]), true
	for i := range t.objs {
		t.bar = min(t.bar, t.key(&t.objs[i]))
	}
}

// selectBest moves the n best objects to the front, in no order
// (quickselect, with the median of three as the pivot).
func (t *topObjects) selectBest(n int) {
	objs := t.objs
	lo, hi := 0, len(objs)
	for hi-lo > 1 {
		m, last := lo+(hi-lo)/2, hi-1
		if t.before(&objs[m], &objs[lo]) {
			objs[m], objs[lo] = objs[lo], objs[m]
		}
		if t.before(&objs[last], &objs[lo]) {
			objs[last], objs[lo] = objs[lo], objs[last]
		}
		if t.before(&objs[m], &objs[last]) {
			objs[m], objs[last] = objs[last], objs[m]
		}
		// objs[last] is the median of the three: the pivot.
		store := lo
		for i := lo; i < last; i++ {
			if t.before(&objs[i], &objs[last]) {
				objs[i], objs[store] = objs[store], objs[i]
				store++
			}
		}
		objs[store], objs[last] = objs[last], objs[store]
		switch {
		case store+1 == n:
			return
		case store+1 > n:
			hi = store
		default:
			lo = store + 1
		}
	}
}

// sorted returns the objects kept, best first.
func (t *topObjects) sorted() []HeapObject {
	t.keepBest()
	objs := slices.Clone(t.objs)
	slices.SortFunc(objs, t.compare)
	return objs
}

// compare orders objects best first, for slices.SortFunc.
func (t *topObjects) compare(a, b HeapObject) int {
	switch {
	case t.before(&a, &b):
		return -1
	case t.before(&b, &a):
		return 1
	}
	return 0
}
