package trace_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/memtrail/memtrail/internal/trace"
)

// TestNextBatchLikeNext checks that NextBatch returns the records, events
// and damage that Next returns, in the same order, on traces cut or
// damaged in many places, alone or with calls of Next in between.
func TestNextBatchLikeNext(t *testing.T) {
	var traces [][]byte
	damage := func(data []byte, every int) {
		for i := 0; i < len(data); i += every {
			flipped := bytes.Clone(data)
			flipped[i] ^= 0x41
			traces = append(traces, flipped, data[:i])
		}
	}
	for _, compressible := range []bool{false, true} {
		data, _ := smallTrace(t, compressible)
		damage(data, 1)
	}
	damage(writeEvents(t, manyEvents(5000), 4096, true), 97)
	traces = append(traces, trace.UnitTrace())
	next := func(int) bool { return true }
	for i, data := range traces {
		want := readAllWith(t, data, next)
		for name, useNext := range map[string]func(int) bool{
			"NextBatch":                   func(int) bool { return false },
			"NextBatch and Next in turns": func(call int) bool { return call%3 == 0 },
		} {
			if got := readAllWith(t, data, useNext); !slices.Equal(got, want) {
				t.Fatalf("trace %d: %s reads\n%q\nNext reads\n%q", i, name, got, want)
			}
		}
	}
}

// readAllWith reads a trace to its end, calling Next where useNext says
// so and NextBatch elsewhere, and returns what it read as text.
func readAllWith(t *testing.T, data []byte, useNext func(call int) bool) []string {
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for call := 0; call < 100000; call++ {
		var events []trace.Event
		var rec trace.Record
		if useNext(call) {
			rec, err = r.Next()
			if rec.Kind.IsEvent() {
				events, rec = []trace.Event{rec.Event}, trace.Record{}
			}
		} else {
			events, rec, err = r.NextBatch()
			if len(events) > 0 && (err != nil || rec.Kind != trace.KindInvalid) {
				t.Fatalf("NextBatch returned events with %v and %v", rec.Kind, err)
			}
		}
		for _, e := range events {
			out = append(out, eventText(e))
		}
		switch {
		case err != nil:
			out = append(out, err.Error())
		case len(events) == 0:
			out = append(out, rec.Kind.String())
		}
		if errors.Is(err, io.EOF) {
			return out
		}
	}
	t.Fatal("reader does not come to an end")
	return nil
}

func eventText(e trace.Event) string {
	return fmt.Sprintf("%+v", e)
}

// TestDroppedReader checks that a Reader dropped before the end of its
// trace leaves no goroutine behind.
func TestDroppedReader(t *testing.T) {
	data := writeEvents(t, manyEvents(20000), 512, true)
	before := runtime.NumGoroutine()
	for range 10 {
		r, err := trace.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	// The cleanups that stop the Readers' goroutines run some time after
	// a collection finds them unreachable.
	for range 100 {
		runtime.GC()
		if runtime.NumGoroutine() <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%d goroutines before reading, %d after dropping the Readers", before, runtime.NumGoroutine())
}

// TestReadOnOneCore checks that a trace of many blocks reads the same with
// one core as with several: with GOMAXPROCS 1 the two halves of the
// decoding of every block read ahead share one token, and must take
// turns, never wait on each other while one holds it.
func TestReadOnOneCore(t *testing.T) {
	data := writeEvents(t, manyEvents(50000), 512, false)
	want := readEvents(t, data)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	got := readEvents(t, data)
	if !slices.Equal(got, want) {
		t.Fatalf("with one core %d events were read, differing from the %d read with more", len(got), len(want))
	}
	if len(want) != 50000 {
		t.Fatalf("%d events read, want 50000", len(want))
	}
}
