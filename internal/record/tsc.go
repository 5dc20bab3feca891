package record

import "time"

// rdtsc reads the CPU's time-stamp counter, the clock the agent stamps
// events with.
func rdtsc() uint64

// clock converts time-stamp counter values to nanoseconds since the
// recording began.
type clock struct {
	start     time.Time
	tscStart  uint64
	nsPerTick float64
}

// calibrate measures the counter's rate, in nanoseconds per tick, against
// the monotonic clock. The counter is invariant on the machines memtrail
// supports (constant_tsc), so one measurement holds for the whole run.
func calibrate() float64 {
	start, tsc := time.Now(), rdtsc()
	time.Sleep(10 * time.Millisecond)
	elapsed := time.Since(start)
	ticks := rdtsc() - tsc
	if ticks == 0 {
		ticks = 1
	}
	return float64(elapsed.Nanoseconds()) / float64(ticks)
}

// ns returns the time of tsc in nanoseconds since the start.
func (c *clock) ns(tsc uint64) uint64 {
	if tsc <= c.tscStart {
		return 0
	}
	return uint64(float64(tsc-c.tscStart) * c.nsPerTick)
}

// now returns the current time in nanoseconds since the start.
func (c *clock) now() uint64 { return c.ns(rdtsc()) }
