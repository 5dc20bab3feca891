package record

// The leak-check heuristics of memcheck (--leak-check-heuristics, "all"
// by default in valgrind 3.19): C++ and some C libraries keep a block by
// a pointer into its interior as a matter of course, and memcheck takes
// such a pointer for one to the block's start when the block has the
// shape the idiom leaves. Without them a C++ program's strings, arrays
// and objects seen through a second base would be "possibly lost" here
// and still reachable under valgrind.
//
// Where memcheck applies them: only while it marks from the roots, to a
// pointer into the interior of a block not reachable yet, whether the
// pointer is in a root or in a block marked from them. A pointer a
// heuristic accepts then counts as a start pointer: the block is still
// reachable if a root or a still reachable block holds the pointer,
// possibly lost if a possibly lost block does. The grouping of
// lost blocks makes no difference between start and interior pointers, so
// the heuristics do not matter there. The outcome of a heuristic depends
// only on the pointer and on the block's contents, so it can be decided
// once per pointer before marking (for the pointers blocks hold: their
// edges lose their interior bit) or as the roots are scanned.
//
// memcheck also requires the words it looks at to be initialized, which
// from outside the process cannot be known. What malloc leaves in a block
// nobody wrote (free-list pointers, zeros) fails the checks anyway: too
// big to be a count or a length, not a vtable address.

import "sort"

// stdString: a copy-on-write std::string (libstdc++'s old ABI) points 24
// bytes into its buffer, after its length, capacity and reference count,
// at the characters and their terminating NUL: the block's size is 24 +
// capacity + 1 and the length is at most the capacity.
func stdString(off, size uint64, head [2]uint64) bool {
	length, capacity := head[0], head[1]
	return off == 24 && 24+capacity+1 == size && length <= capacity
}

// length64: a block whose first 8 bytes hold the length of the rest, kept
// through the address after them (sqlite's allocations, for one). Such a
// block passes newArray too (one element); memcheck names it length64.
func length64(off, size uint64, head [2]uint64) bool {
	return off == 8 && head[0] > 0 && size-8 == head[0]
}

// newArray: new[] of a type with a destructor puts the count of elements
// in the block's first 8 bytes, for delete[], and returns the address
// after it; the rest must divide into that many elements.
func newArray(off, size uint64, head [2]uint64) bool {
	return off == 8 && head[0] > 0 && (size-8)%head[0] == 0
}

// A vtable address is followed by function pointers: memcheck wants
// vtableFns of them among the first vtableWords words.
const vtableWords, vtableFns = 21, 2

// heuristics decides which pointers into blocks' interiors the
// heuristics accept, in the process mem, whose mappings are maps (in
// address order).
type heuristics struct {
	mem     *processMemory
	maps    []mapping
	vtables map[uint64]bool // the answers of isVtable so far
}

// innerPtr is a pointer v into the interior of the block of size bytes at
// start, numbered num, held by a root or a reachable block (definite) or
// by a possibly lost one.
type innerPtr struct {
	v, start, size uint64
	num            uint32
	definite       bool
}

// startLike reports, for each of ps, whether a heuristic takes it for a
// pointer to its block's start.
//
// The first two words of each block are read first, all at once (0 past
// its end), and with them the three heuristics of a block's head decide.
// multipleinheritance: an object of a class with several polymorphic
// bases, seen as one of its bases after the first, is a pointer at that
// base's vtable pointer inside the block; the block itself starts with
// the object's vtable pointer. So the word the pointer points at and the
// block's first word must both be vtable addresses (isVtable). Those
// words at the pointers are read, all at once, only for blocks whose
// first word is one: the others fail anyway.
func (h *heuristics) startLike(ps []innerPtr) []bool {
	var at []uint64
	for _, p := range ps {
		at = append(at, p.start, p.start+8)
	}
	words := h.mem.wordsAt(at)
	out := make([]bool, len(ps))
	var mi []int
	for k, p := range ps {
		head := [2]uint64{words[2*k], words[2*k+1]}
		for i := range head {
			if p.size&^7 < uint64(i+1)*8 {
				head[i] = 0
			}
		}
		off := p.v - p.start
		switch {
		case stdString(off, p.size, head), length64(off, p.size, head), newArray(off, p.size, head):
			out[k] = true
		case p.v%8 == 0 && h.isVtable(head[0]):
			mi = append(mi, k)
		}
	}
	addrs := make([]uint64, len(mi))
	for j, k := range mi {
		addrs[j] = ps[k].v
	}
	for j, w := range h.mem.wordsAt(addrs) {
		out[mi[j]] = h.isVtable(w)
	}
	return out
}

// isVtable reports whether a looks like the address of a vtable, as
// memcheck decides it from its own map of the process's memory, and here
// from /proc/PID/maps: a is 8-byte aligned, above the first page, in a
// readable mapping of a file (vtables are in an object's relocated
// read-only data), and the words from a hold vtableFns function pointers
// (into executable mappings of files) before any other non-null word,
// among the first vtableWords words and within a's mapping. Null words
// are passed over: a vtable can have some. A program has few vtables, so
// each address is looked at once.
func (h *heuristics) isVtable(a uint64) bool {
	if a%8 != 0 || a < pageSize {
		return false
	}
	if v, ok := h.vtables[a]; ok {
		return v
	}
	v := h.looksLikeVtable(a)
	h.vtables[a] = v
	return v
}

func (h *heuristics) looksLikeVtable(a uint64) bool {
	m := h.mapAt(a)
	if m == nil || !m.read || !m.isFile() {
		return false
	}
	// memcheck's last word is the one 8 bytes before its segment's last
	// byte: the mapping's last word is never looked at.
	if a+16 > m.end {
		return false
	}
	n := min(uint64(vtableWords), (m.end-9-a)/8+1)
	b, err := h.mem.read(a, n*8)
	if err != nil {
		return false
	}
	fns := 0
	for i := uint64(0); i < n; i++ {
		w := wordAt(b, i*8)
		if w == 0 {
			continue
		}
		if f := h.mapAt(w); f == nil || !f.exec || !f.isFile() {
			return false
		}
		if fns++; fns == vtableFns {
			return true
		}
	}
	return false
}

// mapAt returns the mapping holding address a, or nil.
func (h *heuristics) mapAt(a uint64) *mapping {
	i := sort.Search(len(h.maps), func(i int) bool { return h.maps[i].end > a })
	if i == len(h.maps) || h.maps[i].start > a {
		return nil
	}
	return &h.maps[i]
}
