package analysis

// joinParts puts together the analyses of consecutive parts of a window of
// a trace of one process (see Windows), each made with the window open over
// all of it, into the analysis of the whole window, keeping objects of each
// object list. The last part is made into the whole, in place:
//
//   - totals add up: allocations, frees, bytes, temporary ones, invalid
//     and uncertain frees, lifetimes, by site, size, bin and thread;
//   - the peak is the highest of the parts' peaks, the earliest if several
//     are as high, and the sites' numbers at the peak are that part's; so
//     are the stack peaks and the peak of heap and stack together, of the
//     process and of each thread, and the deepest stack is the deepest
//     part's; function entries measured add up;
//   - what is live at the end is the last part's: in use at exit, what
//     the sizes and bins keep, the live objects and the heap map;
//   - the freed objects that lived longest are the longest-lived of all the
//     parts' lists, and problems count in all the parts;
//   - the timeline is made of the parts' timelines.
//
// Everything the replay keeps from its start (sites, threads, replaced
// blocks) is in the last part already.
func joinParts(parts []*Model, objects int) *Model {
	whole := parts[len(parts)-1]
	p := whole.Processes[0]
	siteOf := make(map[uint64]int, len(p.Sites)) // by stack ID
	for i := range p.Sites {
		siteOf[p.Sites[i].Stack] = i
	}
	joinPeaks(parts, p, siteOf)
	freed := topObjects{n: objects, by: byAge}
	for _, o := range p.FreedObjects {
		freed.offer(o)
	}
	problems := newProblemSet()
	var tl timelineBuilder
	tl.start(parts[0].Processes[0].Timeline.Start, firstStep(whole.Info))
	for _, m := range parts {
		q := m.Processes[0]
		for _, pr := range q.Problems {
			problems.add(pr)
		}
		tl.add(&q.Timeline)
		if q == p {
			continue
		}
		sum, qs := &p.Summary, &q.Summary
		sum.Allocations += qs.Allocations
		sum.Frees += qs.Frees
		sum.BytesAllocated += qs.BytesAllocated
		sum.Temporary += qs.Temporary
		sum.InvalidFrees += qs.InvalidFrees
		sum.UncertainFrees += qs.UncertainFrees
		sum.StackCalls += qs.StackCalls
		for i := range q.Sites {
			if j, ok := siteOf[q.Sites[i].Stack]; ok {
				p.Sites[j].addCounts(&q.Sites[i])
			}
		}
		for i := range q.Threads {
			th, qt := rpThread(p, i), &q.Threads[i]
			th.Allocations += qt.Allocations
			th.BytesAllocated += qt.BytesAllocated
			th.Frees += qt.Frees
			th.StackCalls += qt.StackCalls
		}
		if len(q.Bins) > 0 && p.Bins == nil {
			p.Bins = make([]Bin, BinCount)
		}
		for i := range q.Bins {
			b, qb := &p.Bins[i], &q.Bins[i]
			b.Allocations += qb.Allocations
			b.Bytes += qb.Bytes
			b.Frees += qb.Frees
		}
		for i := range q.Sizes {
			p.Sizes[i].Allocations += q.Sizes[i].Allocations
			p.Sizes[i].Bytes += q.Sizes[i].Bytes
		}
		for _, o := range q.FreedObjects {
			o.Site = siteOf[q.Sites[o.Site].Stack]
			freed.offer(o)
		}
	}
	p.FreedObjects = freed.sorted()
	p.Problems = problems.list
	sortProblems(p.Problems)
	p.Timeline = tl.finish(p.Start + p.Window.To)
	p.Window.From = parts[0].Processes[0].Window.From
	return whole
}

// joinPeaks sets the peaks of p, the last of the parts, to those of the
// whole: the process's and its sites' from the part with the highest
// peak, and each thread's highest, the earliest of equals.
func joinPeaks(parts []*Model, p *Process, siteOf map[uint64]int) {
	top := parts[0].Processes[0]
	for _, m := range parts[1:] {
		if q := m.Processes[0]; q.Summary.PeakBytes > top.Summary.PeakBytes {
			top = q
		}
	}
	if top != p {
		p.Summary.PeakBytes, p.Summary.PeakTime = top.Summary.PeakBytes, top.Summary.PeakTime
		for i := range p.Sites {
			p.Sites[i].PeakBytes, p.Sites[i].PeakBlocks = 0, 0
		}
		for i := range top.Sites {
			if j, ok := siteOf[top.Sites[i].Stack]; ok {
				p.Sites[j].PeakBytes, p.Sites[j].PeakBlocks = top.Sites[i].PeakBytes, top.Sites[i].PeakBlocks
			}
		}
	}
	peaks := make([]ThreadSummary, len(p.Threads))
	seen := make([]bool, len(p.Threads))
	for _, m := range parts {
		for i, th := range m.Processes[0].Threads {
			if i >= len(peaks) {
				break // the last part has every thread
			}
			if !seen[i] || th.PeakBytes > peaks[i].PeakBytes {
				peaks[i], seen[i] = th, true
			}
		}
	}
	for i := range p.Threads {
		p.Threads[i].PeakBytes, p.Threads[i].PeakTime = peaks[i].PeakBytes, peaks[i].PeakTime
	}
	sum := &p.Summary
	for _, m := range parts {
		q := &m.Processes[0].Summary
		highest(&sum.StackPeakBytes, &sum.StackPeakTime, q.StackPeakBytes, q.StackPeakTime)
		highest(&sum.PeakTotalBytes, &sum.PeakTotalTime, q.PeakTotalBytes, q.PeakTotalTime)
		if d := q.DeepestStack; d.Bytes > sum.DeepestStack.Bytes || d.Bytes == sum.DeepestStack.Bytes && d.Time < sum.DeepestStack.Time {
			sum.DeepestStack = d
		}
		for i, th := range m.Processes[0].Threads {
			if i < len(p.Threads) {
				highest(&p.Threads[i].StackPeakBytes, &p.Threads[i].StackPeakTime, th.StackPeakBytes, th.StackPeakTime)
			}
		}
	}
}

// highest makes bytes and at the peak of bytes and qBytes at qAt: the
// higher, the earlier of equals.
func highest(bytes, at *uint64, qBytes, qAt uint64) {
	if qBytes > *bytes || qBytes == *bytes && qAt < *at {
		*bytes, *at = qBytes, qAt
	}
}

// rpThread returns the summary of the thread at index i of p.Threads,
// adding threads up to it.
func rpThread(p *Process, i int) *ThreadSummary {
	for len(p.Threads) <= i {
		p.Threads = append(p.Threads, ThreadSummary{Index: uint64(len(p.Threads) + 1)})
	}
	return &p.Threads[i]
}

// addCounts adds to s the counts of q, the same site in an earlier part of
// a window.
func (s *Site) addCounts(q *Site) {
	s.Allocations += q.Allocations
	s.BytesAllocated += q.BytesAllocated
	s.Frees += q.Frees
	s.Temporary += q.Temporary
	for i := range s.BySize {
		s.BySize[i].Allocations += q.BySize[i].Allocations
		s.BySize[i].Bytes += q.BySize[i].Bytes
	}
	for i := range s.Lifetimes {
		s.Lifetimes[i] += q.Lifetimes[i]
		s.LifetimeAllocs[i] += q.LifetimeAllocs[i]
	}
}

// problemSet merges the problems of the parts of a window: the same
// problem counts once, with its first occurrence.
type problemSet struct {
	list  []Problem
	index map[problemKey]int
}

func newProblemSet() *problemSet { return &problemSet{index: make(map[problemKey]int)} }

func (ps *problemSet) add(pr Problem) {
	k := problemKey{kind: pr.Kind, allocAPI: pr.AllocAPI, freeAPI: pr.FreeAPI,
		allocStack: pr.AllocStack, freeStack: pr.FreeStack, firstStack: pr.FirstFreeStack}
	if i, ok := ps.index[k]; ok {
		ps.list[i].Count += pr.Count
		return
	}
	ps.index[k] = len(ps.list)
	ps.list = append(ps.list, pr)
}
