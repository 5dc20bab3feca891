package analysis

import "testing"

// TestTimelineCoarsens feeds a timeline more steps than it may keep and
// checks that it doubled its step until they fit, without losing counts or
// peaks on the way.
func TestTimelineCoarsens(t *testing.T) {
	var b timelineBuilder
	b.start(0, 10)
	const steps = 3 * maxTimelinePoints
	var allocs, peak uint64
	for i := range uint64(steps) {
		at := i * 10
		b.point(at).Allocations++
		allocs++
		live := (i * 7919) % 1000 // varied, with its maximum somewhere inside
		peak = max(peak, live)
		b.live(at, live, 1)
	}
	tl := b.finish((steps - 1) * 10)
	if tl.Step != 40 {
		t.Errorf("step %d, want 40 (10 doubled twice)", tl.Step)
	}
	if len(tl.Points) > maxTimelinePoints {
		t.Errorf("%d points, more than %d", len(tl.Points), maxTimelinePoints)
	}
	var gotAllocs, gotPeak uint64
	for _, p := range tl.Points {
		gotAllocs += p.Allocations
		gotPeak = max(gotPeak, p.PeakBytes)
	}
	if gotAllocs != allocs || gotPeak != peak {
		t.Errorf("allocations %d, peak %d; want %d, %d", gotAllocs, gotPeak, allocs, peak)
	}
	// The last point ends with what was live at the last step.
	if last := tl.Points[len(tl.Points)-1]; last.EndBytes != ((steps-1)*7919)%1000 {
		t.Errorf("last point ends with %d bytes, want %d", last.EndBytes, ((steps-1)*7919)%1000)
	}
}

// TestTimelineClone checks that a clone of a timeline (a checkpoint's)
// counts in points of its own: the latest point, which the builder keeps a
// pointer to, is the original's until the clone makes its own.
func TestTimelineClone(t *testing.T) {
	var b timelineBuilder
	b.start(0, 10)
	b.point(5).Allocations++
	b.point(15).Allocations++
	c := b.clone()
	c.point(16).Allocations++ // the step of the latest point
	c.point(17).Frees++
	b.point(18).Allocations++
	if got := b.tl.Points[1].Allocations; got != 2 {
		t.Errorf("the original's latest point has %d allocations, 2 wanted", got)
	}
	if got := c.tl.Points[1]; got.Allocations != 2 || got.Frees != 1 {
		t.Errorf("the clone's latest point has %d allocations and %d frees, 2 and 1 wanted", got.Allocations, got.Frees)
	}
	if b.tl.Points[1].Frees != 0 || len(b.tl.Points) != 2 || len(c.tl.Points) != 2 {
		t.Errorf("the timelines share points: %+v and %+v", b.tl.Points, c.tl.Points)
	}
}
