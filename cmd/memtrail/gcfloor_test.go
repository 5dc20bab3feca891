package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// gogc returns the garbage collector's GOGC now.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// waitGOGC collects, and waits for floorGC's finalizer to set a GOGC for
// which ok holds.
func waitGOGC(t *testing.T, ok func(int) bool) int {
	t.Helper()
	for range 200 {
		runtime.GC()
		if p := gogc(); ok(p) {
			return p
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("GOGC stayed %d after collections", gogc())
	return 0
}

// TestFloorGC checks that floorGC lets a heap below the floor grow to it
// before the next collection, collects at the percent once the heap is
// above the floor, and puts GOGC back.
func TestFloorGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	restore := floorGC(50, 1<<30)
	if p := gogc(); p != 1<<30/(4<<20)*100 {
		t.Errorf("GOGC before the first collection = %d, want %d", p, 1<<30/(4<<20)*100)
	}
	// A test's heap is far below 1 GiB: the next collection comes there.
	p := waitGOGC(t, func(p int) bool { return p != 1<<30/(4<<20)*100 })
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	if n := live[0].Value.Uint64(); p < 50 || uint64(p) < (1<<30-n)*100/n/2 {
		t.Errorf("GOGC = %d with %d bytes live, want the next collection near 1 GiB", p, n)
	}
	restore()
	if p := gogc(); p != 100 {
		t.Errorf("GOGC = %d after restore, want 100", p)
	}

	// A floor below the live heap: GOGC is the percent.
	restore = floorGC(50, 1)
	waitGOGC(t, func(p int) bool { return p == 50 })
	restore()
	if p := gogc(); p != 100 {
		t.Errorf("GOGC = %d after the second restore, want 100", p)
	}
}
