package analysis

import (
	"slices"
	"strings"

	"github.com/memtrail/memtrail/internal/trace"
)

// ProblemKind says what was wrong with a free.
type ProblemKind uint8

const (
	InvalidFree    ProblemKind = iota + 1 // free of an address that was never allocated
	DoubleFree                            // free of a block already freed
	MismatchedFree                        // a block released by another family of APIs than allocated it
	InvalidRealloc                        // realloc of an address that was not a live block
)

func (k ProblemKind) String() string {
	switch k {
	case InvalidFree:
		return "invalid free"
	case DoubleFree:
		return "double free"
	case MismatchedFree:
		return "mismatched free"
	case InvalidRealloc:
		return "invalid realloc"
	}
	return "problem"
}

// Problem is a wrong free, or the same wrong free made several times: the
// occurrences with the same kind, APIs and stacks make one Problem.
type Problem struct {
	Kind      ProblemKind
	Count     uint64
	Size      uint64 // of the block concerned at the first occurrence; 0 if unknown
	FirstTime uint64 // ns since time zero

	AllocAPI   trace.API // APIUnknown if the block is unknown
	FreeAPI    trace.API // of the wrong free or realloc
	AllocStack uint64    // where the block was allocated; 0 if unknown
	FreeStack  uint64    // where the wrong free or realloc was made
	// FirstFreeStack is where a block freed twice, or reallocated after it
	// was freed, was freed the first time.
	FirstFreeStack uint64
}

type problemKey struct {
	kind                              ProblemKind
	allocAPI, freeAPI                 trace.API
	allocStack, freeStack, firstStack uint64
}

// badFree replays a free or realloc (e) of addr, which is not a live
// block: a block freed before (if the heap table remembers its free), or
// an address the process never allocated.
func (rp *replay) badFree(e *trace.Event, addr uint64) {
	if !rp.windowOpen {
		return
	}
	earlier, wasFreed := rp.heap.lookup(addr)
	k := problemKey{kind: InvalidFree, freeAPI: e.API, freeStack: e.Stack}
	if e.Kind == trace.KindRealloc {
		k.kind = InvalidRealloc
	}
	var size uint64
	if wasFreed {
		if k.kind == InvalidFree {
			k.kind = DoubleFree
		}
		k.allocAPI, k.firstStack, size = earlier.api, earlier.freeStack, earlier.size
		if earlier.site != uncounted {
			k.allocStack = rp.proc.Sites[earlier.site].Stack
		}
	}
	rp.proc.Summary.InvalidFrees++
	rp.problem(k, size, e.Time)
}

// setAsideUncertain takes the invalid and double frees and the invalid
// reallocs out of the problems of a process that lost events before its
// end, into Summary.UncertainFrees: the lost events may explain each of
// them (see there). A mismatched free stays: its block was live in the
// trace.
func setAsideUncertain(p *Process) {
	if p.Summary.InvalidFrees == 0 || !lostBeforeEnd(p) {
		return
	}
	p.Problems = slices.DeleteFunc(p.Problems, func(pr Problem) bool {
		return pr.Kind == InvalidFree || pr.Kind == DoubleFree || pr.Kind == InvalidRealloc
	})
	p.Summary.UncertainFrees += p.Summary.InvalidFrees
	p.Summary.InvalidFrees = 0
}

// lostBeforeEnd reports whether p lost events that may come before some
// of its events in the trace. Events lost in flight at the end, or after
// the damage that ended its history, come after all of them; a loss whose
// reason is not known may be anywhere. A process recorded through its own
// allocator, patched, missed an unknown number (its Lost record says 0)
// from its start.
func lostBeforeEnd(p *Process) bool {
	if p.PatchedAllocator() {
		return true
	}
	if p.Lost == 0 {
		return false
	}
	if len(p.LostReasons) == 0 {
		return true
	}
	for _, why := range p.LostReasons {
		if why != trace.LostInFlight && !strings.HasPrefix(why, trace.LostRegionDamaged) {
			return true
		}
	}
	return false
}

// PatchedAllocator reports whether p was recorded through the program's
// own allocation functions, patched (as memtrail run does by default):
// the allocations of that allocator before the patch, or through functions
// it does not export, were not seen (see trace.LostOwnAllocator).
func (p *Process) PatchedAllocator() bool {
	return slices.Contains(p.LostReasons, trace.LostOwnAllocator)
}

// UnseenCause names what may explain p's uncertain frees and the blocks
// it may have freed unseen: its lost events, its patched allocator, or
// both.
func (p *Process) UnseenCause() string {
	const own = "operations of the program's own allocator that memtrail did not see (before it patched it, or through functions it does not export)"
	lost := plural(p.Lost, "event") + " lost"
	switch {
	case !p.PatchedAllocator():
		return lost
	case p.Lost == 0:
		return own
	default:
		return lost + " and " + own
	}
}

// checkFamily reports a mismatched free if the free or realloc e may not
// release block b.
func (rp *replay) checkFamily(b *block, e *trace.Event) {
	// Small enough to inline: most frees match.
	if families[e.API] != families[b.api] {
		rp.mismatch(b, e)
	}
}

// mismatch reports a mismatched free for checkFamily if the families of
// the free e and of the block b differ and are both known.
func (rp *replay) mismatch(b *block, e *trace.Event) {
	have, want := families[e.API], families[b.api]
	if have == trace.FamilyUnknown || want == trace.FamilyUnknown || !rp.windowOpen {
		return
	}
	var allocStack uint64
	if b.site != uncounted {
		allocStack = rp.proc.Sites[b.site].Stack
	}
	k := problemKey{kind: MismatchedFree, allocAPI: b.api, freeAPI: e.API,
		allocStack: allocStack, freeStack: e.Stack}
	rp.problem(k, b.size, e.Time)
}

// families holds the family of every API, for checkFamily: a free looks
// up two without a call.
var families = func() (f [256]trace.Family) {
	for a := range f {
		f[a] = trace.API(a).Family()
	}
	return f
}()

func (rp *replay) problem(k problemKey, size, time uint64) {
	if i, ok := rp.problems[k]; ok {
		rp.proc.Problems[i].Count++
		return
	}
	rp.problems[k] = len(rp.proc.Problems)
	rp.proc.Problems = append(rp.proc.Problems, Problem{
		Kind: k.kind, Count: 1, Size: size, FirstTime: time,
		AllocAPI: k.allocAPI, FreeAPI: k.freeAPI,
		AllocStack: k.allocStack, FreeStack: k.freeStack, FirstFreeStack: k.firstStack,
	})
}

// sortProblems orders problems by kind, then the most frequent first, then
// the first to happen; ties stay as they are, in the order they first
// happened when the list comes from one replay.
func sortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		if a.Kind != b.Kind {
			return int(a.Kind) - int(b.Kind)
		}
		if a.Count != b.Count {
			return cmpUint(b.Count, a.Count)
		}
		return cmpUint(a.FirstTime, b.FirstTime)
	})
}
