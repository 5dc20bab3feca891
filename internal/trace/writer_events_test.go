package trace

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestWriterEvents checks that Events writes what EventAt does one event
// at a time, byte for byte, for events of every kind the recorder meets
// given in runs of any length, over blocks that end in the middle of a
// run; and that an event it cannot write stops it there, the events
// before it written and those after it not.
func TestWriterEvents(t *testing.T) {
	var events []Event
	mixedEvents(100_000, func(e *Event) { events = append(events, *e) })
	bigheapEvents(100_000, func(e *Event) { events = append(events, *e) })
	one := func(events []Event) []byte {
		var b bytes.Buffer
		writeEventsTo(t, &b, Info{TimeUnit: 1000}, 32<<10, func(emit func(*Event)) {
			for i := range events {
				emit(&events[i])
			}
		})
		return b.Bytes()
	}
	runs := func(events []Event, rng *rand.Rand) ([]byte, error) {
		var b bytes.Buffer
		w, err := NewWriter(&b, Info{TimeUnit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		w.Uncompressed, w.BlockSize = true, 32<<10
		var werr error
		for len(events) > 0 && werr == nil {
			n := min(len(events), 1+rng.IntN(200))
			werr = w.Events(events[:n])
			events = events[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes(), werr
	}
	want := one(events)
	got, err := runs(events, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Events wrote %d bytes, not the %d EventAt did", len(got), len(want))
	}

	// An event of no event kind, in the middle of a run.
	bad := append([]Event(nil), events[:5000]...)
	bad[4321].Kind = KindContext
	got, err = runs(bad, rand.New(rand.NewPCG(3, 4)))
	if err == nil {
		t.Fatal("an event of kind Context written")
	}
	if want := one(bad[:4321]); !bytes.Equal(got, want) {
		t.Fatalf("Events stopped at a bad event wrote %d bytes, not the %d of the events before it", len(got), len(want))
	}
}
