package trace_test

import (
	"bytes"
	"errors"
	"io"
	"math"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
	"github.com/memtrail/memtrail/internal/trace/tracetext"
)

// allKinds is a trace with every kind of record, and values that need more
// than one varint byte.
const allKinds = `
info start=1700000000000000000 time-unit=1 hostname=build-7 recorder="memtrail 0.1" max-frames=64 command=[./prog -n "a b" ""]
process id=1 pid=4242 ppid=1 time=5 exe=/usr/bin/prog args=[prog -n "a b" ""] cwd=/home/me
object id=1 path=/usr/bin/prog build-id=0badc0ffee
object id=2 path=/lib/x86_64-linux-gnu/libc.so.6
module process=1 id=1 object=1 base=0x555555554000 time=6 segments=0x0:0x1000:0x0:r--;0x1000:0x2345:0x1000:r-x;0x4000:0x100:0x3000:rw-
module process=1 id=2 object=2 base=0x7ffff7dd0000 time=7
thread process=1 index=1 tid=4242 time=8
thread process=1 index=2 tid=4243 time=9
string id=1 value=main
string id=2 value="src/main.c"
string id=3 value="operator new(unsigned long)"
node process=1 id=1 parent=0 module=1 offset=0x1149
node process=1 id=2 parent=1 module=2 offset=0x9a0c1
symbol object=1 offset=0x1149 frames=1:2:10
symbol object=2 offset=0x9a0c1 frames=3:0:0;1:2:11
object-status object=1 status=full
object-status object=2 status=no-debug message="no DWARF in /lib/x86_64-linux-gnu/libc.so.6"
type object=1 size=204 name=widget
type object=1 size=24 name=node
type object=1 size=24 name=node_t
type object=1 size=1099511627776 name="ns::Box<int, long>"
type object=2 size=0 name=""
alloc process=1 thread=1 time=10 api=malloc addr=0x5555555592a0 size=16 stack=2
alloc process=1 thread=2 time=11 api=new[] addr=0x555555559000 size=1048576 stack=1
realloc process=1 thread=1 time=12 api=realloc old=0x5555555592a0 addr=0x7ffff0000b70 size=4096 stack=2
free process=1 thread=2 time=13 api=delete[]-sized addr=0x555555559000 stack=1
free process=1 thread=1 time=14 api=free addr=0x7ffff0000b70 stack=2
lost process=1 count=3 reason="ring buffer full"
thread-end process=1 index=2 time=15
module-unload process=1 id=2 time=16
process-end id=1 time=17 how=exited code=-1 lost=3
end time=17 events=5
`

// encode writes a trace in text form with the given block size and
// compression. Like tracetext.Encode, it writes End only if the text has it.
func encode(t testing.TB, text string, blockSize int, uncompressed bool) []byte {
	t.Helper()
	recs, err := tracetext.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	info := trace.Info{TimeUnit: 1}
	if len(recs) > 0 && recs[0].Kind == trace.KindInfo {
		info, recs = *recs[0].Info, recs[1:]
	}
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, info)
	if err != nil {
		t.Fatal(err)
	}
	w.BlockSize, w.Uncompressed = blockSize, uncompressed
	if err := tracetext.Write(w, recs); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readAll reads a whole trace, failing the test on any error.
func readAll(t testing.TB, data []byte) []trace.Record {
	t.Helper()
	recs, err := tracetext.Decode(data)
	if err != nil {
		t.Fatalf("reading trace: %v", err)
	}
	return recs
}

func canonical(t testing.TB, text string) string {
	t.Helper()
	recs, err := tracetext.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return tracetext.Format(recs)
}

func TestRoundTripAllKinds(t *testing.T) {
	want := canonical(t, allKinds)
	for _, blockSize := range []int{1, 7, 64, 0} {
		for _, uncompressed := range []bool{false, true} {
			data := encode(t, allKinds, blockSize, uncompressed)
			if got := tracetext.Format(readAll(t, data)); got != want {
				t.Errorf("block size %d, uncompressed %v: read back\n%s\nwant\n%s", blockSize, uncompressed, got, want)
			}
		}
	}
}

// TestRoundTripBigBlocks writes enough events for several default-sized,
// compressed blocks.
func TestRoundTripBigBlocks(t *testing.T) {
	events := manyEvents(300000)
	for _, uncompressed := range []bool{false, true} {
		data := writeEvents(t, events, 0, uncompressed)
		if blocks := len(blockOffsets(t, data)); blocks < 2 {
			t.Fatalf("wrote %d blocks, want several", blocks)
		}
		got := readEvents(t, data)
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

// manyEvents returns a pseudo-random, deterministic sequence of events
// whose addresses, sizes, stacks, processes and threads move both ways.
func manyEvents(n int) []trace.Event {
	events := make([]trace.Event, n)
	for i := range events {
		x := uint64(i)*0x9e3779b97f4a7c15 + 1
		e := trace.Event{Process: 1 + x%2, Thread: 1 + x%5, Time: uint64(i) * 3,
			Addr: 0x1000 + (x>>20)%(1<<40), Stack: x % 50}
		switch x % 3 {
		case 0:
			e.Kind, e.API, e.Size = trace.KindAlloc, trace.APIMalloc, x%100000
		case 1:
			e.Kind, e.API = trace.KindFree, trace.APIFree
		case 2:
			e.Kind, e.API, e.OldAddr, e.Size = trace.KindRealloc, trace.APIRealloc, e.Addr, x%100000
			e.Addr ^= x >> 3
		}
		events[i] = e
	}
	return events
}

// writeEvents writes a complete trace of events.
func writeEvents(t testing.TB, events []trace.Event, blockSize int, uncompressed bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Info{TimeUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	w.BlockSize, w.Uncompressed = blockSize, uncompressed
	for _, e := range events {
		if err := w.Event(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestDeltaEdgeCases writes events whose deltas are extreme: addresses and
// stacks that go down or wrap around, the largest sizes, times that go
// backwards (and must be clamped).
func TestDeltaEdgeCases(t *testing.T) {
	max := uint64(math.MaxUint64)
	events := []trace.Event{
		{Kind: trace.KindAlloc, Process: 1, Thread: 1, Time: 100, API: trace.APIMalloc, Addr: max, Size: max, Stack: max},
		{Kind: trace.KindAlloc, Process: 1, Thread: 1, Time: 100, API: trace.APICalloc, Addr: 0, Size: 0, Stack: 0},
		{Kind: trace.KindRealloc, Process: 1, Thread: 1, Time: 150, API: trace.APIRealloc, OldAddr: max, Addr: 1, Size: 1 << 62, Stack: 1 << 63},
		{Kind: trace.KindFree, Process: 1, Thread: 2, Time: 90, API: trace.APIFree, Addr: 1 << 63, Stack: 5},
		{Kind: trace.KindFree, Process: max, Thread: max, Time: max, API: trace.APIDeleteArrayAlignedNothrow, Addr: 0x10, Stack: 4},
		{Kind: trace.KindAlloc, Process: 2, Thread: 1, Time: 5, API: trace.API(31), Addr: 0x20, Size: 7, Stack: 3},
	}
	// Times never go below the previous event's: 90 and 5 are clamped.
	wantTimes := []uint64{100, 100, 150, 150, max, max}
	for _, blockSize := range []int{1, 0} {
		var buf bytes.Buffer
		w, err := trace.NewWriter(&buf, trace.Info{TimeUnit: 1})
		if err != nil {
			t.Fatal(err)
		}
		w.BlockSize = blockSize
		for _, e := range events {
			if err := w.Event(e); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got := readEvents(t, buf.Bytes())
		if len(got) != len(events) {
			t.Fatalf("read %d events, want %d", len(got), len(events))
		}
		for i, e := range events {
			e.Time = wantTimes[i]
			if got[i] != e {
				t.Errorf("block size %d: event %d read as %+v, want %+v", blockSize, i, got[i], e)
			}
		}
	}
}

// readEvents reads the events of a whole trace as they were written:
// without the fields that only the Reader fills in (see asWritten).
func readEvents(t testing.TB, data []byte) []trace.Event {
	t.Helper()
	var events []trace.Event
	for _, rec := range readAll(t, data) {
		if rec.Kind.IsEvent() {
			events = append(events, asWritten(rec.Event))
		}
	}
	return events
}

// asWritten returns an event the Reader read without the fields that
// the Writer ignores: what the predictors of its block knew of it.
func asWritten(e trace.Event) trace.Event {
	e.Handle, e.OldHandle, e.Block = 0, 0, 0
	return e
}

// TestTimeUnit checks that times are rounded down to the unit and that the
// End record Close writes counts events and has the latest time.
func TestTimeUnit(t *testing.T) {
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Info{TimeUnit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i, ns := range []uint64{999, 1000, 2999, 1_000_000_001} {
		if err := w.Event(trace.Event{Kind: trace.KindAlloc, Time: ns, Addr: 16 * uint64(i+1), Size: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Thread(trace.Thread{Process: 1, Index: 1, TID: 7, Time: 2_000_000_123}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, buf.Bytes())
	var times []uint64
	for _, rec := range recs {
		if rec.Kind.IsEvent() {
			times = append(times, rec.Event.Time)
		}
	}
	if want := []uint64{0, 1000, 2000, 1_000_000_000}; !equal(times, want) {
		t.Errorf("event times %v, want %v", times, want)
	}
	end := recs[len(recs)-1]
	if end.Kind != trace.KindEnd || *end.End != (trace.End{Time: 2_000_000_123, Events: 4}) {
		t.Errorf("last record %v %+v, want end with time 2000000123 and 4 events", end.Kind, end.End)
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWriterRejects(t *testing.T) {
	w, err := trace.NewWriter(io.Discard, trace.Info{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Event(trace.Event{Kind: trace.KindThread}); err == nil {
		t.Error("Event accepted a thread record")
	}
	if err := w.Event(trace.Event{Kind: trace.KindAlloc, API: 32}); err == nil {
		t.Error("Event accepted an api that does not fit in the format")
	}
	if err := w.Write(trace.Record{Kind: trace.KindInfo, Info: &trace.Info{}}); err == nil {
		t.Error("Write accepted an info record")
	}
	if err := w.Write(trace.Record{Kind: trace.KindTime}); err == nil {
		t.Error("Write accepted a time record")
	}
	if err := w.Write(trace.Record{Kind: trace.KindObject}); err == nil {
		t.Error("Write accepted an object record without an Object")
	}
	// Mistakes of the caller are not sticky.
	if err := w.Close(); err != nil {
		t.Errorf("Close after rejected records: %v", err)
	}
	if err := w.Event(trace.Event{Kind: trace.KindAlloc}); err == nil {
		t.Error("Event after Close succeeded")
	}
}

// failingWriter accepts limit bytes, then fails.
type failingWriter struct {
	buf   bytes.Buffer
	limit int
}

var errDiskFull = errors.New("no space left on device")

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.buf.Len()+len(p) > f.limit {
		return 0, errDiskFull
	}
	return f.buf.Write(p)
}

// TestWriterStickyError fills the disk after a few blocks: every call from
// then on fails, and the blocks written before stay readable.
func TestWriterStickyError(t *testing.T) {
	out := &failingWriter{limit: 4096}
	w, err := trace.NewWriter(out, trace.Info{TimeUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	w.BlockSize = 256
	var failed error
	written := 0
	for i := range 100000 {
		err := w.Event(trace.Event{Kind: trace.KindAlloc, Time: uint64(i), Addr: uint64(i) * 4096, Size: 8})
		if err != nil {
			failed = err
			break
		}
		written++
	}
	if failed == nil {
		failed = w.Flush()
	}
	if !errors.Is(failed, errDiskFull) {
		t.Fatalf("writing past the limit failed with %v, want %v", failed, errDiskFull)
	}
	for name, call := range map[string]func() error{
		"Event":  func() error { return w.Event(trace.Event{Kind: trace.KindFree}) },
		"String": func() error { return w.String(trace.String{ID: 1, Value: "x"}) },
		"Flush":  w.Flush,
		"Close":  w.Close,
	} {
		if err := call(); !errors.Is(err, errDiskFull) {
			t.Errorf("%s after the failure returned %v, want %v", name, err, errDiskFull)
		}
	}
	r, err := trace.NewReader(bytes.NewReader(out.buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for {
		rec, err := r.Next()
		if errors.Is(err, trace.ErrIncomplete) {
			break
		}
		if err != nil {
			t.Fatalf("reading what was written: %v", err)
		}
		if rec.Kind.IsEvent() {
			read++
		}
	}
	if read == 0 || read > written {
		t.Errorf("read %d events of the %d written before the failure", read, written)
	}
}

// TestFlush checks that Flush puts everything in the file, readable up to
// a missing End.
func TestFlush(t *testing.T) {
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Info{TimeUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.String(trace.String{ID: 1, Value: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := trace.NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []trace.Kind
	for {
		rec, err := r.Next()
		if err != nil {
			if !errors.Is(err, trace.ErrIncomplete) {
				t.Errorf("after the records: %v, want ErrIncomplete", err)
			}
			break
		}
		kinds = append(kinds, rec.Kind)
	}
	if len(kinds) != 2 || kinds[0] != trace.KindInfo || kinds[1] != trace.KindString {
		t.Errorf("read %v, want info and string", kinds)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after ErrIncomplete: %v, want io.EOF", err)
	}
}

// TestEventsDoNotAllocate checks the hot paths: writing an event and reading
// one allocate nothing (outside of block boundaries).
func TestEventsDoNotAllocate(t *testing.T) {
	events := manyEvents(50000)
	w, err := trace.NewWriter(io.Discard, trace.Info{TimeUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	w.BlockSize = 64 << 20
	i := 0
	if allocs := testing.AllocsPerRun(1000, func() {
		if err := w.Event(events[i]); err != nil {
			t.Fatal(err)
		}
		i++
	}); allocs != 0 {
		t.Errorf("Writer.Event allocates %v times per event", allocs)
	}

	data := writeEvents(t, events, 64<<20, false)
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := r.Next(); err != nil || rec.Kind != trace.KindInfo {
		t.Fatalf("first record: %v, %v", rec.Kind, err)
	}
	if allocs := testing.AllocsPerRun(1000, func() {
		if rec, err := r.Next(); err != nil || !rec.Kind.IsEvent() {
			t.Fatalf("reading events: %v, %v", rec.Kind, err)
		}
	}); allocs != 0 {
		t.Errorf("Reader.Next allocates %v times per event", allocs)
	}
}
