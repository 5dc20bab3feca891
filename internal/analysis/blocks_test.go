package analysis_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace"
)

// TestTraceBlocksDoNotMatter analyzes the same events written in one trace
// block and in many small ones: the replay finds a block by its handle in
// its own trace block and by its address in a later one, and an allocation
// over a live block through a lost free in its own trace block and through
// the address index in a later one, and the counts must not tell which.
// The events are a busy heap's: frees by any thread, reallocs in place and
// moving, frees of addresses never allocated, and allocations over live
// blocks (lost frees).
func TestTraceBlocksDoNotMatter(t *testing.T) {
	events := busyHeap(20000)
	var want string
	for _, blockSize := range []int{0, 64 << 10, 4 << 10, 300} {
		got := countsOf(analyzeBytes(t, writeEvents(t, events, blockSize)))
		if blockSize == 0 {
			want = got
			continue
		}
		if got != want {
			t.Errorf("block size %d:\n%s\nwant, as in one block:\n%s", blockSize, got, want)
		}
	}
}

// writeEvents writes a trace of process 1 and its events, in trace blocks
// of blockSize bytes (0: the Writer's), and returns it.
func writeEvents(t *testing.T, events []trace.Event, blockSize int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Info{TimeUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	w.BlockSize = blockSize
	if err := w.ProcessStart(trace.Process{ID: 1, PID: 100}); err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if err := w.Event(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.ProcessEnd(trace.ProcessEnd{ID: 1, Time: events[len(events)-1].Time + 10}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// busyHeap returns n events of process 1 (see TestTraceBlocksDoNotMatter).
func busyHeap(n int) []trace.Event {
	rng := rand.New(rand.NewPCG(7, 8))
	var live []uint64
	next := uint64(0x10000)
	var events []trace.Event
	for i := range n {
		e := trace.Event{Process: 1, Thread: 1 + uint64(rng.IntN(3)), Time: uint64(10 * (i + 1)),
			Stack: 1 + uint64(rng.IntN(8)), Size: 8 + uint64(rng.IntN(200)), API: trace.APIMalloc,
			StackInUse: uint64(i*7919%8192) &^ 15} // 0 at times: not measured
		take := func() uint64 {
			k := rng.IntN(len(live))
			a := live[k]
			live[k] = live[len(live)-1]
			live = live[:len(live)-1]
			return a
		}
		fresh := func() uint64 {
			next += 256
			return next
		}
		switch r := rng.IntN(40); {
		case r == 0: // a free of an address never allocated
			e.Kind, e.API, e.Addr, e.Size = trace.KindFree, trace.APIFree, 0x7000_0000+uint64(i)*16, 0
		case r < 3 && len(live) > 0: // an allocation over a live block
			e.Kind, e.Addr = trace.KindAlloc, live[rng.IntN(len(live))]
		case r < 8 && len(live) > 0:
			e.Kind, e.API, e.OldAddr = trace.KindRealloc, trace.APIRealloc, take()
			e.Addr = e.OldAddr
			if rng.IntN(2) == 0 {
				e.Addr = fresh()
			}
			live = append(live, e.Addr)
		case r < 20 && len(live) > 0:
			e.Kind, e.API, e.Addr, e.Size = trace.KindFree, trace.APIFree, take(), 0
		default:
			e.Kind, e.Addr = trace.KindAlloc, fresh()
			// Freed addresses come back, as allocators give them.
			if rng.IntN(2) == 0 && next > 0x20000 {
				e.Addr = 0x10000 + 256*uint64(1+rng.IntN(int((next-0x10000)/256)))
				if slices.Contains(live, e.Addr) {
					e.Addr = fresh()
				}
			}
			live = append(live, e.Addr)
		}
		events = append(events, e)
	}
	return events
}

// countsOf writes the counts of the first process of m that do not depend
// on how its trace was cut into blocks.
func countsOf(m *analysis.Model) string {
	p := m.Processes[0]
	var b bytes.Buffer
	fmt.Fprintf(&b, "summary %+v\n", p.Summary)
	for _, s := range p.Sites {
		fmt.Fprintf(&b, "site %d: allocs %d bytes %d frees %d peak %d/%d exit %d/%d temporary %d lifetimes %v %v\n",
			s.Stack, s.Allocations, s.BytesAllocated, s.Frees, s.PeakBytes, s.PeakBlocks,
			s.InUseAtExitBytes, s.InUseAtExitBlocks, s.Temporary, s.Lifetimes, s.LifetimeAllocs)
	}
	for _, pr := range p.Problems {
		fmt.Fprintf(&b, "problem %+v\n", pr)
	}
	return b.String()
}
