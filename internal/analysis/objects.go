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
	keys []uint64 // keys[i] is the key of objs[i]
	// bar is the lowest key of the n kept when the buffer was last cut,
	// if cut is set, and barAllocated and barAddr the allocation time
	// and address of the last of them (see placeUnique).
	bar                   uint64
	barAllocated, barAddr uint64
	cut                   bool
	// order, spare and spareKeys are keepBest's: the selection moves
	// indexes in order, not objects, and the best are gathered into
	// spare and spareKeys, which then trade places with objs and keys.
	order     []int32
	spare     []HeapObject
	spareKeys []uint64
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
	return t.add(k)
}

// placeUnique is place for an object first allocated at time allocated,
// at address addr, of a list whose objects all differ in key, allocation
// time or address (live blocks: each has its own address). An object that
// ranks after the last of the n kept at the latest cut can never be kept:
// it is left out even when its key ties with the bar, as most do when
// blocks of a few sizes are offered by size. (The freed objects of a run
// may tie on all three: see placeFreed.)
func (t *topObjects) placeUnique(k, allocated, addr uint64) *HeapObject {
	// Small enough to inline: most offers stop here.
	if t.cut && k < t.bar {
		return nil
	}
	return t.placeTied(k, allocated, addr, false)
}

// placeFreed is placeUnique for the freed objects, whose key (how long
// they lived) is counted in time units: many tie with the bar and rank
// after it, and are left out here rather than kept for the selection. Two
// objects may tie on all three, which placeUnique's lists cannot: most
// often two blocks at one address that lived less than a time unit. Which
// of such a tie the selection keeps depends on what else the buffer holds,
// so a key of 0 keeps every tie of the bar as place does.
func (t *topObjects) placeFreed(k, allocated, addr uint64) *HeapObject {
	// Small enough to inline: most offers stop here.
	if t.cut && k < t.bar {
		return nil
	}
	return t.placeTied(k, allocated, addr, k == 0)
}

// placeTied is placeUnique for a key at or over the bar; keepTies keeps
// an object that ties with the bar on all three for the selection.
func (t *topObjects) placeTied(k, allocated, addr uint64, keepTies bool) *HeapObject {
	if t.cut && k == t.bar && !keepTies && (allocated > t.barAllocated || allocated == t.barAllocated && addr > t.barAddr) || t.n <= 0 {
		return nil
	}
	return t.add(k)
}

// add returns where to keep one more object, of key k.
func (t *topObjects) add(k uint64) *HeapObject {
	// The buffer grows as objects come (a run may have fewer than n):
	// its memory follows the objects, not the n asked for.
	if len(t.objs) >= 4*t.n {
		t.keepBest()
	}
	t.objs = append(t.objs, HeapObject{})
	t.keys = append(t.keys, k)
	return &t.objs[len(t.objs)-1]
}

// keepBest cuts the buffer to the n best.
func (t *topObjects) keepBest() {
	if len(t.objs) <= t.n {
		return
	}
	order := t.selectBest(t.n)
	best, bestKeys := t.spare[:0], t.spareKeys[:0]
	for _, i := range order {
		best = append(best, t.objs[i])
		bestKeys = append(bestKeys, t.keys[i])
	}
	t.spare, t.objs = t.objs[:0], best
	t.spareKeys, t.keys = t.keys[:0], bestKeys
	// The selection leaves the last of the n best last.
	last := &t.objs[len(t.objs)-1]
	t.bar, t.barAllocated, t.barAddr, t.cut = t.keys[len(t.keys)-1], last.Allocated, last.Addr, true
}

// selectBest returns the indexes of the n best objects, the last of them
// last, in the order a selection that moved the objects themselves would
// leave them in (quickselect, with the median of three as the pivot).
func (t *topObjects) selectBest(n int) []int32 {
	objs, keys := t.objs, t.keys
	order := t.order[:0]
	for i := range objs {
		order = append(order, int32(i))
	}
	t.order = order
	// before(i, j) is topObjects.before of the objects at i and j.
	before := func(i, j int32) bool {
		if keys[i] != keys[j] {
			return keys[i] > keys[j]
		}
		if objs[i].Allocated != objs[j].Allocated {
			return objs[i].Allocated < objs[j].Allocated
		}
		return objs[i].Addr < objs[j].Addr
	}
	lo, hi := 0, len(order)
	for hi-lo > 1 {
		m, last := lo+(hi-lo)/2, hi-1
		if before(order[m], order[lo]) {
			order[m], order[lo] = order[lo], order[m]
		}
		if before(order[last], order[lo]) {
			order[last], order[lo] = order[lo], order[last]
		}
		if before(order[m], order[last]) {
			order[m], order[last] = order[last], order[m]
		}
		// order[last] is the median of the three: the pivot.
		store, pivot := lo, order[last]
		for i := lo; i < last; i++ {
			if before(order[i], pivot) {
				order[i], order[store] = order[store], order[i]
				store++
			}
		}
		order[store], order[last] = order[last], order[store]
		switch {
		case store+1 == n:
			return order[:n]
		case store+1 > n:
			hi = store
		default:
			lo = store + 1
		}
	}
	return order[:n]
}

// join offers t the objects that u, a list of the same key and n, keeps:
// joined, the lists of two parts of a set of objects that all differ in
// rank (placeUnique) keep what one list of the whole set would.
func (t *topObjects) join(u *topObjects) {
	for i := range u.objs {
		o := &u.objs[i]
		if p := t.placeUnique(u.keys[i], o.Allocated, o.Addr); p != nil {
			*p = *o
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

// clone returns a copy of t that shares nothing with it.
func (t *topObjects) clone() topObjects {
	c := *t
	c.objs, c.keys = slices.Clone(t.objs), slices.Clone(t.keys)
	c.order, c.spare, c.spareKeys = nil, nil, nil
	return c
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
