package trace

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestBatchOthersBounded checks that a batch ends after batchOthers other
// records, with thousands of StackNode records between two events, as a
// program of deep call stacks writes them, and that the Reader still
// returns every record and event, in order.
func TestBatchOthersBounded(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Info{TimeUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.ProcessStart(Process{ID: 1, PID: 7}); err != nil {
		t.Fatal(err)
	}
	// want is what the Reader must return: the ID of each node, and 0 for
	// each event.
	var want []uint64
	id := uint64(0)
	for round := range 4 {
		for range 3*batchOthers + round {
			id++
			if err := w.StackNode(StackNode{Process: 1, ID: id, Parent: id - 1, Module: 1, Offset: id}); err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		e := Event{Kind: KindAlloc, API: APIMalloc, Process: 1, Thread: 1, Time: uint64(round), Addr: 0x1000 + 16*uint64(round), Size: 8, Stack: id}
		if err := w.Event(e); err != nil {
			t.Fatal(err)
		}
		want = append(want, 0)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for {
		events, rec, err := r.NextBatch()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.cur != nil && len(r.cur.others) > batchOthers {
			t.Fatalf("a batch holds %d other records, more than %d", len(r.cur.others), batchOthers)
		}
		for range events {
			got = append(got, 0)
		}
		if rec.Kind == KindStackNode {
			got = append(got, rec.StackNode.ID)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("read %d nodes and events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d: read %d, want %d (0: an event)", i, got[i], want[i])
		}
	}
}
