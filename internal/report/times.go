package report

import (
	"strconv"
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
)

// timeUnit returns the resolution of the event times of m, in ns: its
// trace's time unit (memtrail run -time-unit), 1 if it has none.
func timeUnit(m *analysis.Model) uint64 {
	if m == nil || m.Info == nil || m.Info.TimeUnit == 0 {
		return 1
	}
	return m.Info.TimeUnit
}

// afterStart says when an event of p at t (ns since time zero) came, after
// the start of p, with no digit finer than the trace's time unit: event
// times are multiples of the unit, and the start's is not, so a time
// within the first unit may be anywhere in it, and is said so ("in the
// first 1 ms") rather than "0 ns after start".
func afterStart(m *analysis.Model, p *analysis.Process, t uint64) string {
	unit := timeUnit(m)
	since := sinceStart(p, t)
	if unit > 1 && since < unit {
		return "in the first " + durationIn(unit, unit)
	}
	return durationIn(since, unit) + " after start"
}

// durationIn writes a duration measured in units of unit ns as Duration
// does, rounded to the unit, and with no more decimals than its multiples
// need: 6 ms, not 5.82 ms, in units of 1 ms.
func durationIn(ns, unit uint64) string {
	if unit <= 1 {
		return Duration(ns)
	}
	ns = (ns + unit/2) / unit * unit
	s := Duration(ns)
	number, suffix, ok := strings.Cut(s, " ")
	if !ok {
		return s
	}
	scale := map[string]uint64{"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}[suffix]
	_, fraction, _ := strings.Cut(number, ".")
	// As many decimals as the multiples of the unit need.
	decimals, digit := 0, scale
	for decimals < len(fraction) && digit > 1 && unit%digit != 0 {
		decimals++
		digit /= 10
	}
	if decimals == len(fraction) {
		return s
	}
	v, err := strconv.ParseFloat(number, 64)
	if err != nil {
		return s
	}
	return strconv.FormatFloat(v, 'f', decimals, 64) + " " + suffix
}
