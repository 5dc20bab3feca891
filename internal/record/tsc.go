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
type clock struct {
	start     time.Time
	tscStart  uint64
	nsPerTick float64
	// lastTSC and lastNS are the latest conversion: with the coarse
	// clock (coarseClock), runs of thousands of events carry the same
	// counter value, and a comparison costs far less than converting
	// to float64 and back.
	lastTSC, lastNS uint64
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
	if tsc != c.lastTSC {
		c.lastTSC, c.lastNS = tsc, uint64(float64(tsc-c.tscStart)*c.nsPerTick)
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
