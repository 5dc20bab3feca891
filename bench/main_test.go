package main

import (
	"testing"
	"time"
)

// TestParseWaits reads the waits of -stats lines as memtrail writes them
// now (counts with separators, "1 time") and as a baseline revision may.
func TestParseWaits(t *testing.T) {
	const prefix = "memtrail: stats: 33,554,432 events from 1 process, 0 lost; program CPU 8.1 s; memtrail CPU 1.2 s; trace 55,705,600 bytes (1.66 bytes/event); "
	for _, c := range []struct {
		line  string
		waits int64
		time  time.Duration
	}{
		{prefix + "the program waited for memtrail 1,413 times, 8.310 s\n", 1413, 8310 * time.Millisecond},
		{prefix + "the program waited for memtrail 1 time, 0.002 s\n", 1, 2 * time.Millisecond},
		{prefix + "the program waited for memtrail 0 times, 0.000 s\n", 0, 0},
		{"memtrail: stats: 10 events from 1 processes, 0 lost; the program waited for memtrail 1413 times, 8.310 s\n", 1413, 8310 * time.Millisecond},
		{"no stats here\n", 0, 0},
	} {
		waits, wait := parseWaits(c.line)
		if waits != c.waits || wait != c.time {
			t.Errorf("%q: %d times, %v; want %d times, %v", c.line, waits, wait, c.waits, c.time)
		}
	}
}

// TestExtraCell checks the fraction of heaptrack's extra time, and that a
// heaptrack as fast as native gives no fraction instead of a division by
// zero or a negative one.
func TestExtraCell(t *testing.T) {
	for _, c := range []struct {
		memtrail, heaptrack, native time.Duration
		want                        string
	}{
		{2 * time.Second, 4 * time.Second, time.Second, "0.33"},
		{4 * time.Second, 4 * time.Second, time.Second, "1.00"},
		{time.Second, 3 * time.Second, time.Second, "0.00"},
		{2 * time.Second, time.Second, time.Second, "— (heaptrack no slower than native)"},
		{2 * time.Second, time.Second / 2, time.Second, "— (heaptrack no slower than native)"},
	} {
		if got := extraCell(c.memtrail, c.heaptrack, c.native); got != c.want {
			t.Errorf("extraCell(%v, %v, %v) = %q, want %q", c.memtrail, c.heaptrack, c.native, got, c.want)
		}
	}
}
