package trace_test

import (
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
)

// TestColumnsOfOneByteRuns round-trips events whose column values come
// in runs of one byte broken by longer values at every place a chunk of
// the Reader can have them: none, one now and then, or half of them, in
// each column, and stack-use codes all 0 over whole chunks or not. The
// Reader takes runs of one-byte values, and chunks whose stack-use codes
// are all 0, on paths of their own.
func TestColumnsOfOneByteRuns(t *testing.T) {
	seed := uint64(11)
	rnd := func(n uint64) uint64 {
		seed = seed*6364136223846793005 + 1442695040888963407
		return (seed >> 33) % n
	}
	// How often a value of a column breaks its run of one-byte values,
	// 1 in every so many events: never, now and then, or half the time.
	odds := []uint64{0, 997, 61, 2}
	chance := func(every uint64) bool { return every != 0 && rnd(every) == 0 }
	var events []trace.Event
	var live []uint64  // the addresses of the live blocks, the latest last
	var freed []uint64 // the addresses of released blocks, the latest last
	sizeOf := map[uint64]uint64{}
	next := uint64(0x10000)
	for i := range uint64(60000) {
		// Each stretch of 700 events has odds of its own for each
		// column, and mostly one thread and one time, so that its events
		// come in runs long enough to be decoded a chunk at a time.
		phase := i / 700
		stackOdds, sizeOdds, useOdds, addrOdds := odds[phase%4], odds[phase/4%4], odds[phase/16%4], odds[phase/64%4]
		// A few stacks, a few of them with the same stack in use: the
		// stack-use codes are 0, but the predictions come from the
		// stacks, or from the event before for a stack not seen yet.
		stack := 5 + rnd(40)
		e := trace.Event{Process: 1, Thread: 1 + phase%2, Time: i / 1000, API: trace.APIMalloc, Stack: stack, StackInUse: 4096 + 64*(stack/8)}
		if chance(97) {
			e.Thread = 3 // a short run of another thread
		}
		if chance(stackOdds) {
			e.Stack = 1 + rnd(1<<20) // a delta of more than one byte
		}
		if chance(useOdds) {
			e.StackInUse = 16 * rnd(1<<16)
		}
		switch k := rnd(20); {
		case k < 8 && len(live) > 0:
			e.Kind, e.API = trace.KindFree, trace.APIFree
			at := len(live) - 1 - int(rnd(uint64(min(len(live), 4))))
			if chance(addrOdds) {
				at = int(rnd(uint64(len(live)))) // referred to by its handle
			}
			e.Addr = live[at]
			live = append(live[:at], live[at+1:]...)
			freed = append(freed, e.Addr)
		case k < 10 && len(live) > 2:
			// One of the oldest blocks, from a block of the trace
			// before: a raw address, a short step up or down from
			// the one before.
			e.Kind, e.API = trace.KindFree, trace.APIFree
			at := int(rnd(3))
			e.Addr = live[at]
			live = append(live[:at], live[at+1:]...)
		case k < 12 && len(freed) > 0:
			// The address of a block released lately, given out again
			// with its size: an address code of a class list, of
			// another thread's if another thread released it.
			e.Kind = trace.KindAlloc
			at := len(freed) - 1 - int(rnd(uint64(min(len(freed), 3))))
			e.Addr = freed[at]
			e.Size = sizeOf[e.Addr]
			freed = append(freed[:at], freed[at+1:]...)
			live = append(live, e.Addr)
		case k == 12 && len(live) > 0:
			e.Kind, e.API, e.OldAddr = trace.KindRealloc, trace.APIRealloc, live[len(live)-1]
			live = live[:len(live)-1]
			freed = append(freed, e.OldAddr)
			fallthrough
		default:
			if e.Kind == 0 {
				e.Kind = trace.KindAlloc
			}
			e.Size = 16 + 8*rnd(8)
			if chance(sizeOdds) {
				e.Size = 200 + rnd(100000)
			}
			e.Addr = next
			if chance(addrOdds) {
				e.Addr = next + 4096*(1+rnd(1<<20)) // an escape or a long step
			}
			next = e.Addr + (e.Size+15)&^15 + 16
			live = append(live, e.Addr)
			sizeOf[e.Addr] = e.Size
		}
		events = append(events, e)
	}
	for _, uncompressed := range []bool{false, true} {
		got := readEvents(t, writeEvents(t, events, 64<<10, uncompressed))
		if len(got) != len(events) {
			t.Fatalf("read %d events, want %d", len(got), len(events))
		}
		for i := range events {
			if got[i] != events[i] {
				t.Fatalf("event %d read as %+v, want %+v", i, got[i], events[i])
			}
		}
	}
}
