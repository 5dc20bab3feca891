package analysis

import (
	"math/rand/v2"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
)

// TestAllocRuns checks that runs of allocations from one stack and thread,
// whose totals eventsOpen adds at the end of each run, make the same model
// as the same events replayed one at a time, where no run begins: with the
// peaks of the process and the threads moving within runs, runs ended by
// frees, reallocs, allocations of 0 bytes and of other stacks or threads,
// blocks allocated over live ones, events of no thread, and timeline steps
// crossed within a run.
func TestAllocRuns(t *testing.T) {
	for seed := range uint64(32) {
		events := allocRunEvents(seed)
		batched, single := newAnalyzer(Options{Objects: 5}), newAnalyzer(Options{Objects: 5})
		for _, a := range []*analyzer{batched, single} {
			a.record(trace.Record{Kind: trace.KindInfo, Info: &trace.Info{TimeUnit: 1}})
			a.record(trace.Record{Kind: trace.KindProcessStart, Process: &trace.Process{ID: 1, PID: 100}})
		}
		// The first event opens the window: the batch after it is
		// replayed by eventsOpen.
		batched.events(events[:1])
		batched.events(events[1:])
		for i := range events {
			single.events(events[i : i+1])
		}
		want, got := single.finish(), batched.finish()
		if !SameModels(want, got) {
			t.Fatalf("seed %d: replayed in runs, the model differs: %s", seed, DiffModels(want, got))
		}
		p := got.Processes[0]
		if p.Summary.Allocations < 1000 || p.Summary.ReplacedBlocks == 0 || len(p.Threads) < 2 {
			t.Fatalf("seed %d: %d allocations, %d replaced blocks, %d threads: not the trace the test needs",
				seed, p.Summary.Allocations, p.Summary.ReplacedBlocks, len(p.Threads))
		}
	}
}

// allocRunEvents returns the events of a process that allocates in runs
// of one stack and thread, and frees and reallocates between them.
func allocRunEvents(seed uint64) []trace.Event {
	rng := rand.New(rand.NewPCG(seed, 20))
	var events []trace.Event
	var live []uint64
	next := uint64(0x10000)
	now := uint64(1)
	threads := []uint64{1, 2, 3, maxThreads + 5}
	event := func(e trace.Event) {
		e.Process, e.Time = 1, now
		if rng.IntN(3) > 0 {
			e.StackInUse = 512 + rng.Uint64N(4096)
		}
		events = append(events, e)
		now += rng.Uint64N(40) // crosses the timeline's steps, and stays in some
	}
	for range 300 {
		stack, thread := 1+rng.Uint64N(4), threads[rng.IntN(len(threads))]
		for range 1 + rng.IntN(40) {
			size := rng.Uint64N(200)
			if rng.IntN(10) == 0 {
				size = 0
			}
			addr := next
			if len(live) > 0 && rng.IntN(8) == 0 {
				addr = live[rng.IntN(len(live))] // over a live block
			} else {
				next += 256
				live = append(live, addr)
			}
			event(trace.Event{Kind: trace.KindAlloc, API: trace.APIMalloc, Thread: thread, Addr: addr, Size: size, Stack: stack})
		}
		// Frees and reallocs of earlier blocks, so that the peak has
		// to be passed again.
		for range rng.IntN(30) {
			if len(live) == 0 {
				break
			}
			i := rng.IntN(len(live))
			addr := live[i]
			if rng.IntN(4) == 0 {
				live[i] = next
				next += 256
				event(trace.Event{Kind: trace.KindRealloc, API: trace.APIRealloc, Thread: thread, OldAddr: addr, Addr: live[i],
					Size: 1 + rng.Uint64N(300), Stack: 5})
				continue
			}
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			event(trace.Event{Kind: trace.KindFree, API: trace.APIFree, Thread: thread, Addr: addr, Stack: 6})
		}
	}
	return events
}
