package analysis

import (
	"slices"
	"strings"
)

// StackChange is what one call stack allocated in two runs of a program:
// memtrail diff's unit. Stacks are told apart by their functions, from the
// allocator's caller out to main, not by addresses, lines or the names of
// the files: two builds of a program, the same build at two load
// addresses, or under two names, have the same stacks. (A frame without a
// function is its object's file name and offset.) The sites of one run
// with the same functions add up.
type StackChange struct {
	// Frames are the frames of the stack, innermost first, as the new run
	// has them (the old one's if the new run did not allocate there), with
	// the file and line where all its sites of that run agree.
	Frames []Frame
	// Old and New add up the sites of the stack in each run: their
	// allocations, bytes, peak and in-use-at-exit numbers (zero in the run
	// that did not allocate from it).
	Old, New Site
}

// Change returns how much the cost c of the stack grew from the old run to
// the new one (negative if it shrank).
func (sc *StackChange) Change(c Cost) int64 {
	return int64(c.Of(&sc.New)) - int64(c.Of(&sc.Old))
}

// Compare matches the call stacks of two runs, old and new, and returns
// each that allocated in either, ordered by its functions.
func Compare(old, new *Process) []StackChange {
	index := make(map[string]int)
	var changes []StackChange
	fromNew := make([]bool, 0) // by change: its frames are the new run's
	add := func(p *Process, isNew bool) {
		for i := range p.Sites {
			s := &p.Sites[i]
			frames := p.programStack(s)
			key := stackKey(frames)
			j, ok := index[key]
			switch {
			case !ok:
				j = len(changes)
				index[key] = j
				changes = append(changes, StackChange{Frames: slices.Clone(frames)})
				fromNew = append(fromNew, isNew)
			case isNew && !fromNew[j]:
				// The new run's file and line, where the code is now.
				changes[j].Frames, fromNew[j] = slices.Clone(frames), true
			default:
				for k := range changes[j].Frames {
					mergeFrame(&changes[j].Frames[k], frames[k])
				}
			}
			into := &changes[j].Old
			if isNew {
				into = &changes[j].New
			}
			into.add(s)
		}
	}
	add(old, false)
	add(new, true)
	slices.SortFunc(changes, func(a, b StackChange) int {
		return strings.Compare(stackKey(a.Frames), stackKey(b.Frames))
	})
	return changes
}

// stackKey identifies a stack by its functions, outermost first.
func stackKey(frames []Frame) string {
	var b strings.Builder
	for i := len(frames) - 1; i >= 0; i-- {
		b.WriteString(frames[i].Name())
		b.WriteByte(';')
	}
	return b.String()
}

// add adds the numbers of site q of the same stack to s.
func (s *Site) add(q *Site) {
	s.addCounts(q)
	s.PeakBytes += q.PeakBytes
	s.PeakBlocks += q.PeakBlocks
	s.InUseAtExitBytes += q.InUseAtExitBytes
	s.InUseAtExitBlocks += q.InUseAtExitBlocks
}
