package record

import (
	"sync"
	"sync/atomic"
	"time"
)

// rdtsc reads the CPU's time-stamp counter, the clock the agent stamps
// events with.
func rdtsc() uint64

// clock converts time-stamp counter values to nanoseconds since the
// recording began.
//
// Its rate is first measured over about a millisecond (calibrate), so
// that the program starts at once, and measured again, from the start,
// once the run is a second old (refine): from then on the rate is as
// good as a run of an hour needs (tens of microseconds off at its end,
// rather than about twenty milliseconds for a rate measured once over 10
// ms). The times before the refined rate are kept as they were, and the
// refined rate goes on from the time the first one gave, so times never
// jump back.
type clock struct {
	start     time.Time
	tscStart  uint64
	firstRate float64 // nanoseconds per tick, up to refTSC
	nsPerTick float64 // and from refTSC on, where the time is refNS
	refTSC    uint64
	refNS     uint64
	refined   bool
	// lastTSC and lastNS are the latest conversion: with the coarse
	// clock (coarseClock), runs of thousands of events carry the same
	// counter value, and a comparison costs far less than converting
	// to float64 and back.
	lastTSC, lastNS uint64
}

// newClock starts a clock now, at the rate calibrate measured.
func newClock(rate float64) clock {
	start, tsc := clockPair()
	return clock{start: start, tscStart: tsc, firstRate: rate, nsPerTick: rate, refTSC: tsc}
}

// calibrateFor is how long calibrate measures the counter's rate: long
// enough for a rate a few parts in 100,000 off (a few microseconds in
// the second before refine), short enough not to hold the program's start.
const calibrateFor = time.Millisecond

// refineAfter is how long into the run refine measures the rate again.
const refineAfter = time.Second

// calibrate measures the counter's rate, in nanoseconds per tick, against
// the monotonic clock. The counter is invariant on the machines memtrail
// supports (constant_tsc), so one rate holds for the whole run; refine
// measures it better once the run has lasted.
func calibrate() float64 {
	start, tsc := clockPair()
	time.Sleep(calibrateFor)
	now, tscNow := clockPair()
	return rateBetween(start, tsc, now, tscNow)
}

// rateBetween returns the counter's rate between two pairs of clock and
// counter readings.
func rateBetween(start time.Time, tsc uint64, now time.Time, tscNow uint64) float64 {
	ticks := tscNow - tsc
	if tscNow <= tsc {
		ticks = 1
	}
	return float64(now.Sub(start).Nanoseconds()) / float64(ticks)
}

// clockPair reads the monotonic clock and the counter at about the same
// moment: the counter on both sides of the clock, its middle kept, from
// the closest of a few tries (a thread preempted between the reads would
// put microseconds between them).
func clockPair() (time.Time, uint64) {
	var at time.Time
	var tsc uint64
	gap := ^uint64(0)
	for range 4 {
		before := rdtsc()
		now := time.Now()
		after := rdtsc()
		if after >= before && after-before < gap {
			gap, at, tsc = after-before, now, before+(after-before)/2
		}
	}
	if gap == ^uint64(0) { // a counter that went back: no better pair
		return time.Now(), rdtsc()
	}
	return at, tsc
}

// refine measures the rate again over the run so far, once the run is
// refineAfter old; the time of now under the first rate is where the
// refined one takes over. The recorder's loop calls it, the only
// goroutine that converts times.
func (c *clock) refine(now time.Time) {
	if c.refined || now.Sub(c.start) < refineAfter {
		return
	}
	c.refined = true
	at, tsc := clockPair()
	rate := rateBetween(c.start, c.tscStart, at, tsc)
	c.refNS = c.ns(tsc)
	c.refTSC, c.nsPerTick = tsc, rate
	c.lastTSC = 0
}

// ns returns the time of tsc in nanoseconds since the start.
func (c *clock) ns(tsc uint64) uint64 {
	if tsc <= c.tscStart {
		return 0
	}
	if tsc != c.lastTSC {
		if tsc >= c.refTSC {
			c.lastNS = c.refNS + uint64(float64(tsc-c.refTSC)*c.nsPerTick)
		} else {
			c.lastNS = uint64(float64(tsc-c.tscStart) * c.firstRate)
		}
		c.lastTSC = tsc
	}
	return c.lastNS
}

// now returns the current time in nanoseconds since the start.
func (c *clock) now() uint64 { return c.ns(rdtsc()) }

// coarseClock is the clock the agents stamp events with when the trace's
// time unit is coarse (see mt_header.coarse in protocol.h): a time-stamp
// counter value in each region's header that a goroutine moves on every
// period. An event's time is then late by at most a period plus the time
// the goroutine waits to be scheduled, and the agent saves reading the
// counter, a fifth of what recording an event costs the program. The
// period is a quarter of the unit, but Go's timers fire late when the
// runtime is otherwise idle (a sleep below a millisecond lasts about a
// millisecond here), so with the default 1 ms unit a time may be late by
// about one unit. Ticking on time with nanosleep on a thread of its own
// was measured: memtrail then took 13% of a CPU while the program slept.
type coarseClock struct {
	period  time.Duration
	ticks   uint64 // period in counter ticks, for the agent
	mu      sync.Mutex
	regions map[*region]bool
	stop    chan struct{}
}

// coarseClockFor returns the clock for a time unit, or nil when the unit is
// too fine for one: below minCoarseUnit the agent reads the counter itself.
func coarseClockFor(unit time.Duration, nsPerTick float64) *coarseClock {
	if unit < minCoarseUnit || nsPerTick <= 0 {
		return nil
	}
	period := unit / 4
	c := &coarseClock{period: period, ticks: uint64(float64(period.Nanoseconds()) / nsPerTick),
		regions: map[*region]bool{}, stop: make(chan struct{})}
	go c.run()
	return c
}

// minCoarseUnit is the finest time unit the coarse clock serves: its
// period is a quarter of the unit, and a goroutine waking more often than
// every 50µs would cost more than it saves.
const minCoarseUnit = 200 * time.Microsecond

// add makes region r's agent stamp events with the clock.
func (c *coarseClock) add(r *region) {
	c.mu.Lock()
	defer c.mu.Unlock()
	atomic.StoreUint64(r.u64(hdrClock), rdtsc())
	*r.u64(hdrClockPeriod) = c.ticks
	atomic.StoreUint64(r.u64(hdrCoarse), 1)
	c.regions[r] = true
	r.clock = c
}

// remove stops moving r's clock on; it must come before r is unmapped.
func (c *coarseClock) remove(r *region) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.regions, r)
}

func (c *coarseClock) run() {
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		now := rdtsc()
		c.mu.Lock()
		for r := range c.regions {
			atomic.StoreUint64(r.u64(hdrClock), now)
		}
		c.mu.Unlock()
		time.Sleep(c.period)
	}
}

func (c *coarseClock) close() {
	if c != nil {
		close(c.stop)
	}
}
