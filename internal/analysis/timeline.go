package analysis

import (
	"slices"

	"github.com/memtrail/memtrail/internal/trace"
)

// Timeline samples the heap of a process over the analyzed window in
// equal steps: at most maxTimelinePoints of them, however long the run.
type Timeline struct {
	Start  uint64 // ns since time zero of the first point
	Step   uint64 // ns between points
	Points []TimelinePoint
}

// TimelinePoint is what happened in one step of a timeline.
type TimelinePoint struct {
	// PeakBytes and PeakBlocks are the most live at any moment of the step
	// (or, if nothing happened in it, what was live throughout).
	PeakBytes, PeakBlocks uint64
	// EndBytes and EndBlocks are what was live at its end.
	EndBytes, EndBlocks uint64
	Allocations         uint64
	BytesAllocated      uint64
	Frees               uint64
	BytesFreed          uint64
	// StackBytes is the most stack in use at any moment of the step,
	// summed over the threads (Summary.StackPeakBytes), or what was in
	// use throughout if nothing happened in it.
	StackBytes uint64
}

// Time returns the start of point i, in ns since time zero.
func (t *Timeline) Time(i int) uint64 { return t.Start + uint64(i)*t.Step }

// maxTimelinePoints bounds a timeline: enough for a chart as wide as a
// screen, few enough to cost nothing.
const maxTimelinePoints = 1024

// timelineBuilder fills a Timeline as events come, in time order. It
// starts with steps of the trace's time unit and doubles them, merging
// pairs of points, whenever the run outgrows the points it may have.
type timelineBuilder struct {
	tl      Timeline
	started bool
	// last is the point of the latest event, and lastEnd the time its step
	// ends: events come in time order, most in the step of the one
	// before. last is kept as a pointer, not an index, for the events of
	// that step find their point without a bounds check; it is good only
	// while lastEnd is not 0 (see clone).
	last    *TimelinePoint
	lastEnd uint64
	// stackNow is the stack in use now, which the steps that come carry.
	stackNow uint64
}

func (b *timelineBuilder) start(at, step uint64) {
	*b = timelineBuilder{tl: Timeline{Start: at, Step: max(step, 1)}, started: true}
}

// clone returns a copy of b that shares nothing with it.
func (b *timelineBuilder) clone() timelineBuilder {
	c := *b
	c.tl.Points = slices.Clone(b.tl.Points)
	c.last, c.lastEnd = nil, 0 // last is a point of b's
	return c
}

// point returns the point of an event at t (ns since time zero), making
// the points up to it, which carry over what was live.
func (b *timelineBuilder) point(t uint64) *TimelinePoint {
	if t < b.lastEnd {
		// Most events fall in the step of the one before (lastEnd is 0
		// until there is one).
		return b.last
	}
	return b.newPoint(t)
}

// newPoint returns the point of an event at t that falls after the step
// of the one before.
func (b *timelineBuilder) newPoint(t uint64) *TimelinePoint {
	if t < b.tl.Start {
		t = b.tl.Start
	}
	i := (t - b.tl.Start) / b.tl.Step
	for i >= maxTimelinePoints {
		b.coarsen()
		i = (t - b.tl.Start) / b.tl.Step
	}
	for uint64(len(b.tl.Points)) <= i {
		var carried TimelinePoint
		if n := len(b.tl.Points); n > 0 {
			prev := b.tl.Points[n-1]
			carried = TimelinePoint{PeakBytes: prev.EndBytes, PeakBlocks: prev.EndBlocks, EndBytes: prev.EndBytes, EndBlocks: prev.EndBlocks,
				StackBytes: b.stackNow}
		}
		b.tl.Points = append(b.tl.Points, carried)
	}
	b.last = &b.tl.Points[i]
	b.lastEnd = b.tl.Time(int(i)) + b.tl.Step
	return b.last
}

// Merge returns the point of a step made of p's and the next one's.
func (p TimelinePoint) Merge(next TimelinePoint) TimelinePoint {
	if next.PeakBytes > p.PeakBytes {
		p.PeakBytes, p.PeakBlocks = next.PeakBytes, next.PeakBlocks
	}
	p.EndBytes, p.EndBlocks = next.EndBytes, next.EndBlocks
	p.Allocations += next.Allocations
	p.BytesAllocated += next.BytesAllocated
	p.Frees += next.Frees
	p.BytesFreed += next.BytesFreed
	p.StackBytes = max(p.StackBytes, next.StackBytes)
	return p
}

// coarsen doubles the step, merging the points two by two.
func (b *timelineBuilder) coarsen() {
	pts := b.tl.Points
	n := (len(pts) + 1) / 2
	for i := range n {
		merged := pts[2*i]
		if 2*i+1 < len(pts) {
			merged = merged.Merge(pts[2*i+1])
		}
		pts[i] = merged
	}
	b.tl.Points = pts[:n]
	b.tl.Step *= 2
	b.lastEnd = 0 // the latest point moved
}

// stack notes the stack in use after an event at t.
func (b *timelineBuilder) stack(t, bytes uint64) {
	pt := b.point(t)
	pt.StackBytes = max(pt.StackBytes, bytes)
	b.stackNow = bytes
}

// stackPeak notes the stack in use reached at t, which may be in a step
// before the latest one: a trace.StackCalls record comes after the events
// of its time unit when its thread made no call since.
func (b *timelineBuilder) stackPeak(t, bytes uint64) {
	if n := uint64(len(b.tl.Points)); n > 0 && t >= b.tl.Start {
		if i := (t - b.tl.Start) / b.tl.Step; i < n {
			b.tl.Points[i].StackBytes = max(b.tl.Points[i].StackBytes, bytes)
			return
		}
	}
	pt := b.point(t)
	pt.StackBytes = max(pt.StackBytes, bytes)
}

// live notes what is live after an event at t.
func (b *timelineBuilder) live(t, bytes, blocks uint64) { b.point(t).live(bytes, blocks) }

// live notes what is live after an event of p's step.
func (p *TimelinePoint) live(bytes, blocks uint64) {
	if bytes > p.PeakBytes {
		p.PeakBytes, p.PeakBlocks = bytes, blocks
	}
	p.EndBytes, p.EndBlocks = bytes, blocks
}

// add adds the points of t, the timeline of a later part of the same
// window, each to the step its start falls in.
func (b *timelineBuilder) add(t *Timeline) {
	for i, pt := range t.Points {
		at := b.point(t.Time(i))
		*at = at.Merge(pt)
	}
}

// firstStep returns the step a timeline starts with: the time unit of
// the trace, and at least 1 µs.
func firstStep(info *trace.Info) uint64 {
	if info == nil {
		return 1000
	}
	return max(info.TimeUnit, 1000)
}

// finish extends the timeline to end (ns since time zero), so that it
// covers the whole window.
func (b *timelineBuilder) finish(end uint64) Timeline {
	if b.started && end >= b.tl.Start {
		b.point(end)
	}
	return b.tl
}
