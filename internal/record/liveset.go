package record

import (
	"maps"

	"github.com/memtrail/memtrail/internal/trace"
)

// liveSet is the blocks a process has allocated, address to size, kept
// for its leak scan at exit (see leakscan.go). The recorder updates it at
// every event, so it is laid out by address (blockTable): a Go map keyed
// by address spread a program's live blocks over the cache, and would
// cost several times the bytes a block.
type liveSet struct {
	blocks blockTable

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

// add notes a new block; one already at addr (whose free the recorder
// never saw) is replaced.
func (l *liveSet) add(addr, size uint64) {
	if addr != 0 {
		l.blocks.put(addr, size)
	}
}

func (l *liveSet) remove(addr uint64) {
	if addr == 0 {
		return
	}
	l.blocks.remove(addr)
	if l.origins != nil {
		delete(l.origins, addr)
	}
}

// size returns the size of the block at addr, if it is live.
func (l *liveSet) size(addr uint64) (uint64, bool) {
	return l.blocks.find(addr)
}

// clone returns a copy of l: a fork child's heap is its parent's.
func (l *liveSet) clone() *liveSet {
	return &liveSet{blocks: *l.blocks.clone(), origins: maps.Clone(l.origins)}
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
		if _, live := l.blocks.find(v); live {
			o.Addr = v
			l.origins[v] = o
		}
	}
}
