package trace_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
)

// TestReadsVersion1 reads testdata/version1.mtr, which the Writer of
// format version 1 wrote (writeOldWorkload, in compressed blocks of
// several kinds of events), and checks that it holds what the same
// workload written now holds, without stack use.
func TestReadsVersion1(t *testing.T) {
	old, err := os.ReadFile("testdata/version1.mtr")
	if err != nil {
		t.Fatal(err)
	}
	if v := old[8]; v != 1 {
		t.Fatalf("testdata/version1.mtr is of version %d", v)
	}
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Info{StartUnixNano: 1, TimeUnit: 1000, Hostname: "h", Recorder: "memtrail v1", MaxFrames: 64, Command: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeOldWorkload(w); err != nil {
		t.Fatal(err)
	}
	got, want := readEverything(t, old), readEverything(t, buf.Bytes())
	if len(got) != len(want) || len(got) < 6000 {
		t.Fatalf("version 1 trace: %d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Kind.IsEvent() {
			// Blocks are cut at other events: compare what the events say.
			g.Event.Handle, g.Event.OldHandle, g.Event.Block = 0, 0, 0
			w.Event.Handle, w.Event.OldHandle, w.Event.Block = 0, 0, 0
			if g.Event != w.Event {
				t.Fatalf("record %d: %+v, want %+v", i, g.Event, w.Event)
			}
			continue
		}
		if g.Kind != w.Kind {
			t.Fatalf("record %d: %v, want %v", i, g.Kind, w.Kind)
		}
	}
}

// readEverything reads every record of a trace, which must be sound.
func readEverything(t *testing.T, data []byte) []trace.Record {
	t.Helper()
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var recs []trace.Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return recs
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
}

// TestStackInUseRoundTrip writes events whose stack in use the predictor
// gets right and wrong, on several threads and processes, with lost frees
// among them, in blocks small enough that the predictor starts afresh
// often, and reads them back one by one and in batches.
func TestStackInUseRoundTrip(t *testing.T) {
	var events []trace.Event
	seed := uint64(7)
	rnd := func(n uint64) uint64 {
		seed = seed*6364136223846793005 + 1442695040888963407
		return (seed >> 33) % n
	}
	next := map[uint64]uint64{1: 0x1000, 2: 0x1000}
	for i := range uint64(20000) {
		// Short runs of events of a thread, decoded one by one, then
		// long ones, decoded a chunk at a time.
		p, th := 1+rnd(2), 1+rnd(3)
		if i >= 10000 {
			p, th = 1+i/1000%2, 1+i/700%3
		}
		e := trace.Event{Kind: trace.KindAlloc, API: trace.APIMalloc, Process: p, Thread: th, Time: i,
			Size: 16, Stack: rnd(6000), Addr: next[p]}
		next[p] += 32
		switch rnd(5) {
		case 0:
			e.StackInUse = 0
		case 1:
			e.StackInUse = e.Stack*16 + 4096 // what the stack predicts
		case 2:
			e.StackInUse = 4096 + rnd(1<<20) // any value
		case 3:
			e.StackInUse = trace.MaxStackInUse - rnd(3)
		default:
			e.StackInUse = 8*rnd(1000) + 16
		}
		if rnd(50) == 0 && next[p] > 0x1100 {
			// The allocator gave out an address the trace holds live:
			// the Writer adds a lost free before it.
			e.Addr = next[p] - 64
		}
		events = append(events, e)
	}
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Info{TimeUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	w.BlockSize = 32 << 10
	for _, e := range events {
		if err := w.Event(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Event(trace.Event{Kind: trace.KindFree, API: trace.APIFree, Process: 1, Thread: 1, StackInUse: trace.MaxStackInUse + 1}); err == nil {
		t.Error("the Writer took a stack in use over MaxStackInUse")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var got []trace.Event
	for _, rec := range readEverything(t, buf.Bytes()) {
		if rec.Kind.IsEvent() && rec.Event.API != trace.APILost {
			got = append(got, rec.Event)
		}
	}
	if len(got) != len(events) {
		t.Fatalf("read %d events, want %d", len(got), len(events))
	}
	for i := range got {
		if got[i].StackInUse != events[i].StackInUse || got[i].Stack != events[i].Stack {
			t.Fatalf("event %d: stack %d, %d bytes in use; want stack %d, %d", i, got[i].Stack, got[i].StackInUse, events[i].Stack, events[i].StackInUse)
		}
	}
	r, err := trace.NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		batch, _, err := r.NextBatch()
		if errors.Is(err, io.EOF) {
			break
		}
		for _, e := range batch {
			if e.API == trace.APILost {
				continue
			}
			if e.StackInUse != events[n].StackInUse {
				t.Fatalf("batch event %d: %d bytes in use, want %d", n, e.StackInUse, events[n].StackInUse)
			}
			n++
		}
	}
	if n != len(events) {
		t.Fatalf("batches held %d events, want %d", n, len(events))
	}
}

// writeOldWorkload writes a trace of two processes, three threads and
// 6000 events in small compressed blocks: the workload of
// testdata/version1.mtr, which the Writer of format version 1 wrote.
func writeOldWorkload(w *trace.Writer) error {
	w.BlockSize = 8 << 10
	if err := w.ProcessStart(trace.Process{ID: 1, PID: 100, Exe: "/bin/a", Args: []string{"a"}, Cwd: "/"}); err != nil {
		return err
	}
	if err := w.ProcessStart(trace.Process{ID: 2, PID: 101, PPID: 100, Parent: 1, Exe: "/bin/b", Cwd: "/"}); err != nil {
		return err
	}
	for i := uint64(1); i <= 3; i++ {
		if err := w.Thread(trace.Thread{Process: 1 + i/3, Index: 1 + i%2, TID: 100 + i, Time: i}); err != nil {
			return err
		}
	}
	for id := uint64(1); id <= 40; id++ {
		if err := w.StackNode(trace.StackNode{Process: 1, ID: id, Parent: id / 2, Module: 1, Offset: 0x1000 + 16*id}); err != nil {
			return err
		}
	}
	var live [2][]uint64
	next := [2]uint64{0x10000, 0x900000}
	seed := uint64(1)
	rnd := func(n uint64) uint64 {
		seed = seed*6364136223846793005 + 1442695040888963407
		return (seed >> 33) % n
	}
	for i := uint64(0); i < 6000; i++ {
		p := rnd(2)
		e := trace.Event{Process: p + 1, Thread: 1 + rnd(2), Time: 1000 + i*37, Stack: 1 + rnd(40), API: trace.APIMalloc}
		switch {
		case len(live[p]) > 0 && rnd(3) == 0:
			k := rnd(uint64(len(live[p])))
			e.Kind, e.API, e.Addr = trace.KindFree, trace.APIFree, live[p][k]
			live[p] = append(live[p][:k], live[p][k+1:]...)
		case len(live[p]) > 0 && rnd(5) == 0:
			k := rnd(uint64(len(live[p])))
			e.Kind, e.API, e.OldAddr, e.Size = trace.KindRealloc, trace.APIRealloc, live[p][k], 64+rnd(256)
			e.Addr = next[p]
			next[p] += 512
			live[p][k] = e.Addr
		default:
			e.Kind, e.Size, e.Addr = trace.KindAlloc, 1+rnd(200), next[p]
			next[p] += 256
			live[p] = append(live[p], e.Addr)
		}
		if err := w.Event(e); err != nil {
			return err
		}
	}
	if err := w.ProcessEnd(trace.ProcessEnd{ID: 2, Time: 2000000, How: trace.EndExited}); err != nil {
		return err
	}
	if err := w.ProcessEnd(trace.ProcessEnd{ID: 1, Time: 2000000, How: trace.EndExited}); err != nil {
		return err
	}
	return w.Close()
}
