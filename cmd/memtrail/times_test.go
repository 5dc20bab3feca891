package main

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"
)

// TestShortRunTimes records multi short, about 15 ms: 7 ms of sleep, then
// 1 MiB live for 1 ms, then 7 ms of sleep. With the default 1 ms unit the
// report says when the peak came in whole milliseconds, which is all the
// trace knows (not 5.82 ms, nor 0 ns); with a 10 µs unit, at a time that
// leaves 7 ms of the run before the peak and 8 ms after it.
func TestShortRunTimes(t *testing.T) {
	peakLine := regexp.MustCompile(`peak heap +1\.00 MiB \(1,048,576 bytes\), ([0-9.]+) (ms|µs|ns) after start\n`)
	for _, c := range []struct {
		unit      string
		wholeUnit bool // the text's time is in whole milliseconds
	}{{"", true}, {"10us", false}} {
		var opts []string
		if c.unit != "" {
			opts = []string{"-time-unit", c.unit}
		}
		trace := recordMultiWith(t, opts, "short")
		text, _ := runOK(t, "report", trace)
		found := peakLine.FindStringSubmatch(text)
		if found == nil {
			t.Errorf("-time-unit %q: no peak of 1 MiB some time after start in\n%s", c.unit, text)
			continue
		}
		if c.wholeUnit && (found[2] != "ms" || regexp.MustCompile(`\.`).MatchString(found[1])) {
			t.Errorf("-time-unit %q: the peak came %s %s after start: finer than the 1 ms unit", c.unit, found[1], found[2])
		}
		js, _ := runOK(t, "report", "-json", trace)
		var r struct {
			Summary struct {
				PeakTimeNS uint64 `json:"peak_time_ns"`
				RunTimeNS  uint64 `json:"run_time_ns"`
			} `json:"summary"`
		}
		if err := json.Unmarshal([]byte(js), &r); err != nil {
			t.Fatal(err)
		}
		peak, runTime := time.Duration(r.Summary.PeakTimeNS), time.Duration(r.Summary.RunTimeNS)
		if peak > runTime {
			t.Errorf("-time-unit %q: peak %v after start, after the end of the run, %v", c.unit, peak, runTime)
		}
		if c.unit == "10us" && (peak < 7*time.Millisecond-10*time.Microsecond || runTime-peak < 8*time.Millisecond-10*time.Microsecond) {
			t.Errorf("-time-unit 10us: peak %v after start in a run of %v: the program slept 7 ms before it and 8 ms after", peak, runTime)
		}
	}
}
