package record

import (
	"maps"
	"slices"

	"github.com/memtrail/memtrail/internal/addrmap"
	"github.com/memtrail/memtrail/internal/trace"
)

// liveSet is the blocks a process has allocated, address to size, kept
// for its leak scan at exit (see leakscan.go). The recorder updates it at
// every event, so it is laid out by address (addrmap): a Go map keyed by
// address cost the recorder about 110 ns an event on python3, whose
// million live blocks it spread over the cache, and made recording the
// dense loop 1.5 times slower.
type liveSet struct {
	sizes addrmap.Map
	big   map[uint64]uint64 // sizes of bigSize and more

	// origins holds, with Options.LeakOrigins, for live blocks that a
	// freed block pointed to (at their start), the last such free.
	origins map[uint64]trace.LeakOrigin
}

func newLiveSet(origins bool) *liveSet {
	l := &liveSet{}
	if origins {
		l.origins = make(map[uint64]trace.LeakOrigin)
	}
	return l
}

// bigSize is the greatest size sizes holds; a block this big or bigger
// has its size in big.
const bigSize = 1<<32 - 2

func (l *liveSet) apply(ev *trace.Event) {
	switch ev.Kind {
	case trace.KindAlloc:
		l.add(ev.Addr, ev.Size)
	case trace.KindFree:
		l.remove(ev.Addr)
	case trace.KindRealloc:
		l.remove(ev.OldAddr)
		l.add(ev.Addr, ev.Size)
	}
}

func (l *liveSet) add(addr, size uint64) {
	if addr == 0 {
		return
	}
	if old, had := l.sizes.Put(addr, uint32(min(size, bigSize))); had && old == bigSize {
		delete(l.big, addr) // a free the recorder never saw: the block is new
	}
	if size >= bigSize {
		if l.big == nil {
			l.big = make(map[uint64]uint64)
		}
		l.big[addr] = size
	}
}

func (l *liveSet) remove(addr uint64) {
	if addr == 0 {
		return
	}
	if s, _ := l.sizes.Remove(addr); s == bigSize {
		delete(l.big, addr)
	}
	if l.origins != nil {
		delete(l.origins, addr)
	}
}

// size returns the size of the block at addr, if it is live.
func (l *liveSet) size(addr uint64) (uint64, bool) {
	s, ok := l.sizes.Find(addr)
	if ok && s == bigSize {
		return l.big[addr], true
	}
	return uint64(s), ok
}

// sorted returns the live blocks' addresses, in increasing order, and
// their sizes.
func (l *liveSet) sorted() (addrs, sizes []uint64) {
	addrs = make([]uint64, 0, l.sizes.Len())
	l.sizes.Each(func(addr uint64, _ uint32) { addrs = append(addrs, addr) })
	slices.Sort(addrs)
	sizes = make([]uint64, len(addrs))
	for i, a := range addrs {
		sizes[i], _ = l.size(a)
	}
	return addrs, sizes
}

// clone returns a copy of l: a fork child's heap is its parent's.
func (l *liveSet) clone() *liveSet {
	c := &liveSet{sizes: l.sizes.Clone()}
	c.big, c.origins = maps.Clone(l.big), maps.Clone(l.origins)
	return c
}

// freeing notes what block o.Parent, about to be freed by the free that o
// describes, held (words of its FREE and POINTERS records: index in the
// block << 48 | value): each live block it points to the start of has o
// as its origin now. Words past the size the block was asked for are
// malloc's slack, stale, and left out.
func (l *liveSet) freeing(o trace.LeakOrigin, words []uint64) {
	size, ok := l.size(o.Parent)
	if !ok || l.origins == nil {
		return
	}
	for _, w := range words {
		index, v := w>>48, w&(1<<48-1)
		if index*8+8 > size && index != 0xffff || v == o.Parent {
			continue
		}
		if _, live := l.sizes.Find(v); live {
			o.Addr = v
			l.origins[v] = o
		}
	}
}
