package record

import (
	"math"
	"testing"
	"time"
)

// TestClockRefine checks that refine replaces a rate that is off with the
// counter's own, and that times stay continuous and in order across the
// point where the refined rate takes over.
func TestClockRefine(t *testing.T) {
	rate := calibrate()
	c := newClock(rate * 1.5) // a first rate half again too slow a clock
	// Make the run a second old: the start a second back, in both clocks.
	c.start = c.start.Add(-refineAfter)
	c.tscStart -= uint64(float64(refineAfter.Nanoseconds()) / rate)
	c.refTSC = c.tscStart

	c.refine(c.start.Add(refineAfter / 2))
	if c.refined {
		t.Fatalf("refined half a second into the run")
	}
	before := c.ns(c.tscStart + 1000)
	c.refine(time.Now())
	if !c.refined {
		t.Fatalf("not refined a second into the run")
	}
	if got := c.nsPerTick / rate; math.Abs(got-1) > 0.05 {
		t.Errorf("refined rate %.4g ns a tick, the counter's is %.4g", c.nsPerTick, rate)
	}
	if c.firstRate != rate*1.5 {
		t.Errorf("first rate %.4g, want %.4g kept for the times before", c.firstRate, rate*1.5)
	}
	if got := c.ns(c.tscStart + 1000); got != before {
		t.Errorf("a time before the refinement moved from %d to %d ns", before, got)
	}
	// At the point where the refined rate takes over, the time is the first
	// rate's; around it, times go on in order at each side's rate.
	at := c.refTSC
	if want := uint64(float64(at-c.tscStart) * c.firstRate); c.ns(at) != want {
		t.Errorf("time at the refinement %d ns, want %d under the first rate", c.ns(at), want)
	}
	prev := uint64(0)
	for tsc := at - 10000; tsc < at+10000; tsc += 7 {
		ns := c.ns(tsc)
		if ns < prev {
			t.Fatalf("time went back from %d to %d ns at tick %d (refined at %d)", prev, ns, tsc, at)
		}
		prev = ns
	}
	step := float64(c.ns(at+1_000_000)-c.ns(at)) / 1e6
	if math.Abs(step/c.nsPerTick-1) > 1e-5 { // whole nanoseconds at both ends
		t.Errorf("after the refinement, %.6g ns a tick, want the refined %.6g", step, c.nsPerTick)
	}
	// Once only.
	tsc, rateNow := c.refTSC, c.nsPerTick
	c.refine(time.Now().Add(time.Hour))
	if c.refTSC != tsc || c.nsPerTick != rateNow {
		t.Errorf("refined a second time")
	}
}
