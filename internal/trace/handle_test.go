package trace_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
)

// heapEvents returns events of two processes of three threads each, in
// groups to be written a block each: allocations at fresh addresses and at
// addresses freed lately, frees and reallocs by any thread of the process,
// frees and reallocs of addresses the process never allocated (a fork
// child's of its parent's, say), and allocations at addresses still live
// (their frees were lost).
func heapEvents(groups, perGroup int) [][]trace.Event {
	rng := rand.New(rand.NewPCG(5, 6))
	type heap struct {
		live  []uint64
		freed []uint64
		next  uint64
	}
	heaps := []*heap{{next: 0x10000}, {next: 0x90000}}
	var out [][]trace.Event
	var now uint64
	for range groups {
		var group []trace.Event
		for range perGroup {
			p := rng.IntN(2)
			h := heaps[p]
			now += 10
			e := trace.Event{Process: uint64(p + 1), Thread: 1 + uint64(rng.IntN(3)), Time: now,
				Stack: 1 + uint64(rng.IntN(5)), Size: 8 + uint64(rng.IntN(100))}
			newAddr := func() uint64 {
				if n := len(h.freed); n > 0 && rng.IntN(2) == 0 {
					i := rng.IntN(n)
					a := h.freed[i]
					h.freed = append(h.freed[:i], h.freed[i+1:]...)
					return a
				}
				h.next += 128
				return h.next
			}
			takeLive := func() uint64 {
				i := rng.IntN(len(h.live))
				a := h.live[i]
				h.live = append(h.live[:i], h.live[i+1:]...)
				return a
			}
			switch r := rng.IntN(20); {
			case r == 0: // an address this process never allocated
				e.Kind, e.API, e.Addr, e.Size = trace.KindFree, trace.APIFree, heaps[1-p].next+16, 0
			case r == 1 && len(h.live) > 0: // its free was lost
				e.Kind, e.API, e.Addr = trace.KindAlloc, trace.APIMalloc, h.live[rng.IntN(len(h.live))]
			case r == 2:
				e.Kind, e.API, e.OldAddr, e.Addr = trace.KindRealloc, trace.APIRealloc, heaps[1-p].next+32, newAddr()
				h.live = append(h.live, e.Addr)
			case r < 5 && len(h.live) > 0:
				e.Kind, e.API, e.OldAddr = trace.KindRealloc, trace.APIRealloc, takeLive()
				e.Addr = e.OldAddr
				if rng.IntN(2) == 0 {
					h.freed = append(h.freed, e.OldAddr)
					e.Addr = newAddr()
				}
				h.live = append(h.live, e.Addr)
			case r < 12 && len(h.live) > 0:
				e.Kind, e.API, e.Addr, e.Size = trace.KindFree, trace.APIFree, takeLive(), 0
				h.freed = append(h.freed, e.Addr)
			default:
				e.Kind, e.API, e.Addr = trace.KindAlloc, trace.APIMalloc, newAddr()
				h.live = append(h.live, e.Addr)
			}
			group = append(group, e)
		}
		out = append(out, group)
	}
	return out
}

// TestEventHandles checks the handles the Reader gives events: a free (or
// the old block of a realloc) has the handle of the allocation that made
// its block when both are in the same block of the trace and process,
// whichever thread allocated it, and 0 otherwise; a handle is unique among
// the live blocks of its process in its block; and Block counts blocks.
func TestEventHandles(t *testing.T) {
	groups := heapEvents(30, 300)
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Info{TimeUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, group := range groups {
		if i == 10 {
			// The child starts with a copy of its parent's heap, but not
			// with its handles.
			if err := w.Fork(trace.Fork{Process: 1, Child: 2}); err != nil {
				t.Fatal(err)
			}
		}
		for _, e := range group {
			if err := w.Event(e); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil { // each group is a block of its own
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	events := readBlockEvents(t, buf.Bytes())

	// The handle of each live block by process, Block and address (the
	// latest one given to the address), and the addresses of the live
	// handles.
	type key struct {
		process uint64
		block   uint32
		addr    uint64
	}
	type handleKey struct {
		process uint64
		block   uint32
		handle  uint32
	}
	handleOf := make(map[key]uint32)
	live := make(map[handleKey]bool)
	var named, unnamed int // frees with and without a handle
	release := func(i int, e *trace.Event, addr uint64, got uint32) {
		k := key{e.Process, e.Block, addr}
		if want := handleOf[k]; got != want {
			t.Fatalf("event %d, %+v: releases handle %d, want %d", i, *e, got, want)
		}
		if got == 0 {
			unnamed++
			return
		}
		named++
		delete(handleOf, k)
		delete(live, handleKey{e.Process, e.Block, got})
	}
	allocate := func(i int, e *trace.Event) {
		hk := handleKey{e.Process, e.Block, e.Handle}
		if e.Handle == 0 || live[hk] {
			t.Fatalf("event %d, %+v: handle %d is 0 or the handle of a live block", i, *e, e.Handle)
		}
		live[hk] = true
		handleOf[key{e.Process, e.Block, e.Addr}] = e.Handle
	}
	n, lost := 0, 0
	for g, group := range groups {
		for j := range group {
			e := &events[n]
			if want := uint32(g + 1); e.Block != want {
				t.Fatalf("event %d of group %d is in Block %d, want %d", j, g, e.Block, want)
			}
			if k := (key{e.Process, e.Block, group[j].Addr}); handleOf[k] != 0 && group[j].Kind != trace.KindFree &&
				(group[j].Kind == trace.KindAlloc || group[j].OldAddr != group[j].Addr) {
				// An allocation over a live block of the trace block:
				// the Writer frees that block first.
				if e.Kind != trace.KindFree || e.API != trace.APILost || e.Addr != group[j].Addr {
					t.Fatalf("event %d, %+v: want a lost free of %#x before %+v", n, *e, group[j].Addr, group[j])
				}
				release(n, e, e.Addr, e.Handle)
				n++
				lost++
				e = &events[n]
			}
			switch e.Kind {
			case trace.KindAlloc:
				allocate(n, e)
			case trace.KindFree:
				release(n, e, e.Addr, e.Handle)
			case trace.KindRealloc:
				release(n, e, e.OldAddr, e.OldHandle)
				if e.OldHandle != 0 && e.Handle != e.OldHandle {
					t.Fatalf("event %d, %+v: a realloc of handle %d gets handle %d", n, *e, e.OldHandle, e.Handle)
				}
				allocate(n, e)
			}
			n++
		}
	}
	if n != len(events) {
		t.Fatalf("read %d events, want %d and %d lost frees", len(events), n-lost, lost)
	}
	// Each case must have come up, for the test to mean something.
	if lost < 20 {
		t.Errorf("%d lost frees: the events do not test them", lost)
	}
	if named < 1000 || unnamed < 500 {
		t.Errorf("%d frees with a handle and %d without: the events do not test handles", named, unnamed)
	}
}

// readBlockEvents reads the events of a sound trace with NextBatch.
func readBlockEvents(t *testing.T, data []byte) []trace.Event {
	t.Helper()
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var events []trace.Event
	for {
		batch, _, err := r.NextBatch()
		if errors.Is(err, io.EOF) {
			return events
		}
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, batch...)
	}
}

// TestDocExampleHandles checks the handles of the events of the example
// in docs/format.md against its table of the heap state.
func TestDocExampleHandles(t *testing.T) {
	doc, err := os.ReadFile("../../docs/format.md")
	if err != nil {
		t.Fatalf("reading the format document: %v", err)
	}
	events := readBlockEvents(t, docExampleBytes(t, string(doc)))
	want := []struct{ handle, oldHandle uint32 }{
		{1, 0}, // handle 1 = 0x5010
		{2, 0}, // handle 2 = 0x5030
		{1, 0}, // handle 1 released
		{1, 0}, // handle 1 (reused)
		{2, 2}, // old: handle 2, released; new: handle 2
		{0, 0}, // raw: a block allocated before the trace
	}
	if len(events) != len(want) {
		t.Fatalf("read %d events, want %d", len(events), len(want))
	}
	for i, e := range events {
		if e.Handle != want[i].handle || e.OldHandle != want[i].oldHandle || e.Block != 1 {
			t.Errorf("event %d: handle %d, old handle %d, block %d; want %d, %d, 1",
				i+1, e.Handle, e.OldHandle, e.Block, want[i].handle, want[i].oldHandle)
		}
	}
}
