package trace

import (
	"bytes"
	"io"
	"slices"
	"sync/atomic"
	"testing"
)

// unitTrace is a file whose blocks have their time unit from an Info in
// an earlier block, in the same block after some events, or from no Info
// at all.
func unitTrace() []byte {
	info := func(unit int) []byte { return rec(KindInfo, int64(0), unit, "", "", 0, 0) }
	a := alloc(16, step(0x1000))
	return craftFile(
		block(recs(rec(KindTime, 4), events(1)), a),                                             // unit 1
		block(recs(info(10), rec(KindTime, 3), events(1)), a),                                   // 10
		block(recs(rec(KindTime, 2), events(2)), a, a),                                          // 10, from the block before
		block(recs(rec(KindTime, 1), events(1), info(1000), rec(KindTime, 1), events(1)), a, a), // 10, then 1000
		block(recs(rec(KindTime, 5), events(1), rec(KindTime, 1), events(1), endRec), a, a))     // 1000
}

// unitTraceTimes are the times of the events of unitTrace.
var unitTraceTimes = []uint64{4, 30, 20, 20, 10, 2000, 5000, 6000}

// TestTimeUnitOfEarlierBlocks checks that events get the unit of the
// latest Info before them in the file, whichever block it is in.
func TestTimeUnitOfEarlierBlocks(t *testing.T) {
	var times []uint64
	r, err := NewReader(bytes.NewReader(unitTrace()))
	if err != nil {
		t.Fatal(err)
	}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind.IsEvent() {
			times = append(times, rec.Event.Time)
		}
	}
	if !slices.Equal(times, unitTraceTimes) {
		t.Errorf("event times %v, want %v", times, unitTraceTimes)
	}
}

// TestTimeUnitCorrected decodes each block of unitTrace with a wrong guess
// of the unit of the blocks before it, as a block decoded before an Info
// of an earlier block is: the Reader must correct the times.
func TestTimeUnitCorrected(t *testing.T) {
	data := unitTrace()
	src := &source{r: bytes.NewReader(data[fileHeaderSize:]), offset: fileHeaderSize}
	r := &Reader{unit: 1}
	var hint atomic.Uint64
	var times []uint64
	for sound := uint32(1); ; sound++ {
		f := src.next(nil)
		if !f.found {
			break
		}
		hint.Store(7) // never the right one
		d := newBlockDecoder(&f, sound, &hint)
		for more := true; more; {
			b := new(batch)
			more = d.fill(b)
			r.take(b)
			for _, e := range b.events {
				times = append(times, e.Time)
			}
		}
	}
	if !slices.Equal(times, unitTraceTimes) {
		t.Errorf("event times %v, want %v", times, unitTraceTimes)
	}
}

// UnitTrace is unitTrace, for the tests of package trace_test.
var UnitTrace = unitTrace
