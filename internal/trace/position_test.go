package trace

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestReaderAt reads a trace of many blocks, and from the position before
// each of them reads it again with NewReaderAt: the events are the rest
// of the trace's, with the same block numbers and times.
func TestReaderAt(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Info{TimeUnit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	w.BlockSize = 2 << 10
	if err := w.ProcessStart(Process{ID: 1, PID: 100}); err != nil {
		t.Fatal(err)
	}
	for i := range uint64(5000) {
		e := Event{Kind: KindAlloc, API: APIMalloc, Process: 1, Thread: 1, Time: i * 3000, Addr: 0x10000 + i*64, Size: 48, Stack: 1 + i%5}
		if i%2 == 1 {
			e = Event{Kind: KindFree, API: APIFree, Process: 1, Thread: 1, Time: i * 3000, Addr: 0x10000 + (i-1)*64}
		}
		if err := w.Event(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	// The events after each block start, read from the start.
	type start struct {
		at   Position
		rest []Event
	}
	var all []Event
	var starts []start
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for {
		events, _, err := r.NextBatch()
		if at, ok := r.BlockStart(); ok {
			starts = append(starts, start{at: at, rest: []Event{}})
		}
		if errors.Is(err, io.EOF) {
			break
		}
		for i := range starts {
			starts[i].rest = append(starts[i].rest, events...)
		}
		all = append(all, events...)
	}
	if len(starts) < 10 || len(all) != 5000 {
		t.Fatalf("%d events in %d blocks; want 5000 in many", len(all), len(starts))
	}
	for _, s := range starts {
		r := NewReaderAt(bytes.NewReader(data[s.at.Offset:]), s.at)
		var got []Event
		for {
			events, _, err := r.NextBatch()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("from %+v: %v", s.at, err)
			}
			got = append(got, events...)
		}
		if len(got) != len(s.rest) {
			t.Fatalf("from %+v: %d events, want %d", s.at, len(got), len(s.rest))
		}
		for i := range got {
			if got[i] != s.rest[i] {
				t.Fatalf("from %+v: event %d is %+v, want %+v", s.at, i, got[i], s.rest[i])
			}
		}
	}
}

// writerOfProcess returns a Writer to buf that has started process 1.
func writerOfProcess(t *testing.T, buf *bytes.Buffer) *Writer {
	t.Helper()
	w, err := NewWriter(buf, Info{TimeUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.ProcessStart(Process{ID: 1, PID: 100}); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestBlockStartAfterNext reads the first record of a block with Next and
// the rest with NextBatch: that rest is not a block's start.
func TestBlockStartAfterNext(t *testing.T) {
	var buf bytes.Buffer
	w := writerOfProcess(t, &buf)
	if err := w.Event(Event{Kind: KindAlloc, API: APIMalloc, Process: 1, Thread: 1, Time: 1, Addr: 0x1000, Size: 8}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.BlockStart(); ok {
		t.Error("a block's start after Next")
	}
	r.NextBatch()
	if _, ok := r.BlockStart(); ok {
		t.Error("the second thing of a block, read with NextBatch after Next, is its start")
	}
}

// TestBlockEventsBounded writes events that the predictors guess
// perfectly, so that blocks would fill by size only after millions of
// them: a block ends after maxBlockEvents events all the same, and none is
// lost.
func TestBlockEventsBounded(t *testing.T) {
	var buf bytes.Buffer
	w := writerOfProcess(t, &buf)
	const n = 2*maxBlockEvents + 10
	for i := range n / 2 {
		if err := w.Event(Event{Kind: KindAlloc, API: APIMalloc, Process: 1, Thread: 1, Time: 1, Addr: 0x1000, Size: 8, Stack: 1}); err != nil {
			t.Fatalf("event %d: %v", 2*i, err)
		}
		if err := w.Event(Event{Kind: KindFree, API: APIMalloc, Process: 1, Thread: 1, Time: 1, Addr: 0x1000, Stack: 1}); err != nil {
			t.Fatalf("event %d: %v", 2*i+1, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > 64<<10 {
		t.Errorf("the trace of %d events takes %d bytes", n, buf.Len())
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	events, blocks, most, inBlock := 0, 0, 0, 0
	for {
		evs, _, err := r.NextBatch()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, start := r.BlockStart(); start {
			blocks++
			inBlock = 0
		}
		events += len(evs)
		inBlock += len(evs)
		most = max(most, inBlock)
	}
	if events != n {
		t.Errorf("read %d events, wrote %d", events, n)
	}
	if blocks < 3 || most > maxBlockEvents {
		t.Errorf("%d blocks, the biggest of %d events; want at least 3 of at most %d", blocks, most, maxBlockEvents)
	}
}
