package record

// The leak scan's sweep. Marking reads the blocks whose state rose, a
// batch at a time; that costs little while the frontier is wide, but a
// list whose nodes lie in random address order has a frontier of one
// block, and reading it costs a process_vm_readv per node, many times
// what reading that node with its neighbours costs. So once the reads of
// small batches have cost about what reading the blocks not yet scanned
// would (sweepRatio), the marker reads them all once in address order
// and keeps, for each, its pointers to live blocks as block numbers; the
// marking goes on in memory from there, whatever order it takes. The
// sweep thus costs at most about twice what the batches it saves would
// have, and marking never costs much more than reading the heap once.
//
// The pointers kept are bounded (sweepBudget): a sweep that would keep
// more stops there, and the blocks it did not reach are read in batches
// as before.

import (
	"math"
	"sort"

	"github.com/memtrail/memtrail/internal/pages"
)

const (
	// A small batch, read on its own, costs about as much as sweeping
	// sweepRatio blocks.
	smallBatch = 16
	sweepRatio = 64
	// interiorEdge marks a pointer into a block's interior that no
	// heuristic takes for a start pointer.
	interiorEdge = 1 << 31
)

// sweepBudget returns how many pointers a sweep of a heap of blocks live
// blocks keeps at most: 8 bytes a block, which with the graph's 4 bytes a
// block of starts stays within what the recorder may spend a live block
// (docs/performance.md).
var sweepBudget = func(blocks int) int { return max(2*blocks, 1<<16) }

// blockGraph is what a sweep kept: for each block it read, numbered
// below the index's odd blocks, its pointers to live blocks.
type blockGraph struct {
	swept   []uint64 // a bit per block: the block is in the graph
	start   []uint32 // by block number: its first pointer in targets, and start[num+1] its end
	targets []uint32 // block numbers, interiorEdge set for an interior pointer
}

func (g *blockGraph) has(num uint32) bool {
	return int(num/64) < len(g.swept) && g.swept[num/64]&(1<<(num%64)) != 0
}

func (g *blockGraph) edges(num uint32) []uint32 {
	return g.targets[g.start[num]:g.start[num+1]]
}

// shouldSweep reports whether the small batches read so far have cost
// about what a sweep would: reading the blocks not yet reachable, and
// going through the others (about a quarter of the cost of one read).
func (m *marker) shouldSweep() bool {
	n := m.ix.count()
	return m.graph == nil && !m.noSweep && m.smallReads*sweepRatio >= n-m.reached+n/4
}

// sweep reads, in address order, every block that may still be scanned
// (not reachable, or reachable and waiting on the stack), but those bigger
// than a window and the odd ones, and keeps their pointers to blocks not
// reachable yet in m.graph. Pointers into interiors are put to the
// heuristics now: their answer depends only on the pointer and the
// block's contents.
func (m *marker) sweep() {
	ix := m.ix
	if ix.n >= interiorEdge {
		m.noSweep = true
		return
	}
	words := (ix.n + 63) / 64
	pending := make([]uint64, words)
	for _, e := range m.stack {
		if int(e.num) < ix.n {
			pending[e.num/64] |= 1 << (e.num % 64)
		}
	}
	budget := sweepBudget(ix.count())
	g := &blockGraph{swept: pending, start: pages.Slice[uint32](ix.n+1, ix.n+1), targets: make([]uint32, 0, min(budget, 1<<16))}
	// pending becomes swept as blocks are: a block pending is swept, and
	// the bit of one not swept is cleared.
	var (
		bb       = &blockBatch{mem: &processMemory{pid: m.pid}}
		nums     []uint32
		inner    []innerPtr
		innerAt  []int // where each of inner is in g.targets
		ranges   int
		bytes    uint64
		stopped  bool
		lo, span = ix.lo, ix.hi - ix.lo
	)
	resolve := func() {
		for k, start := range m.heur.startLike(inner) {
			if start {
				g.targets[innerAt[k]] &^= interiorEdge
			}
		}
		inner, innerAt = inner[:0], innerAt[:0]
	}
	flush := func() {
		if len(bb.items) == 0 || m.err != nil {
			return
		}
		bb.plan()
		bb.read()
		err := bb.each(func(k int, b []byte) {
			if stopped {
				return
			}
			num, from := nums[k], len(g.targets)
			for w := uint64(0); w+8 <= uint64(len(b)); w += 8 {
				v := wordAt(b, w)
				if v-lo >= span {
					continue
				}
				t, start, size, ok := ix.main.findStart(v)
				if !ok || m.state[t] == reachable {
					continue
				}
				if len(g.targets) == budget {
					stopped = true
					break
				}
				if len(g.targets) == cap(g.targets) {
					// Grown by hand: append could go past the budget.
					g.targets = append(pages.Slice[uint32](0, min(2*cap(g.targets), budget)), g.targets...)
				}
				if v == start {
					// Twice the same pointer (a doubly linked
					// node of one, a block's head and tail) is
					// one edge.
					if len(g.targets) == from || g.targets[len(g.targets)-1] != t {
						g.targets = append(g.targets, t)
					}
					continue
				}
				inner = append(inner, innerPtr{v: v, start: start, size: size, num: t, definite: true})
				innerAt = append(innerAt, len(g.targets))
				g.targets = append(g.targets, t|interiorEdge)
			}
			if stopped {
				g.targets = g.targets[:from]
				for len(innerAt) > 0 && innerAt[len(innerAt)-1] >= from {
					inner, innerAt = inner[:len(inner)-1], innerAt[:len(innerAt)-1]
				}
				return
			}
			g.swept[num/64] |= 1 << (num % 64)
			g.start[num+1] = uint32(len(g.targets) - from)
		})
		if err != nil {
			m.err = err
		}
		if len(inner) > 0 && m.err == nil {
			resolve()
		}
		bb.items, nums, ranges, bytes = bb.items[:0], nums[:0], 0, 0
	}
	ix.each(0, math.MaxUint64, func(num uint32, addr, size uint64) {
		if int(num) >= ix.n {
			return
		}
		isPending := pending[num/64]&(1<<(num%64)) != 0
		g.swept[num/64] &^= 1 << (num % 64)
		if stopped || m.err != nil || size > scanWindow || m.state[num] == reachable && !isPending {
			return
		}
		merges := len(bb.items) > 0 && addr <= bb.items[len(bb.items)-1].addr+bb.items[len(bb.items)-1].size+rangeGap
		if !merges && ranges == batchRanges || bytes+size > scanWindow {
			flush()
			merges = false
		}
		if !merges {
			ranges++
		}
		bb.items = append(bb.items, scanItem{addr: addr, size: size})
		nums = append(nums, num)
		bytes += size
	})
	flush()
	for num := range ix.n {
		g.start[num+1] += g.start[num]
	}
	m.graph = g
}

// follow scans block num from the graph.
func (m *marker) follow(num uint32) {
	definite := m.state[num] != possible
	for _, t := range m.graph.edges(num) {
		target := t &^ interiorEdge
		if !m.raise(target, t&interiorEdge == 0, definite) {
			continue
		}
		if m.graph.has(target) {
			m.stack = append(m.stack, stackEntry{num: target})
			continue
		}
		addr, size := m.ix.block(target)
		m.stack = append(m.stack, stackEntry{addr: addr, num: target, size: uint32(min(size, math.MaxUint32))})
	}
}

// block returns the address and size of block num.
func (ix *blockIndex) block(num uint32) (addr, size uint64) {
	if int(num) >= ix.n {
		a := ix.odd[int(num)-ix.n]
		return a, ix.t.odd[a]
	}
	k := sort.Search(len(ix.pages), func(k int) bool { return ix.base[ix.pages[k]] > num }) - 1
	p := ix.pages[k]
	pg := ix.t.at(p)
	r := int(num - ix.base[p])
	a := ix.addrOf(pg, r)
	return a, ix.t.sizeAt(pg, r, a)
}
