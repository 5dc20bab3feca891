package trace

import (
	"bytes"
	"errors"
	"fmt"
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

// TestAddressDamageSkipsWhatFollows damages an event so that only the
// addresses give it away (it frees a block that is not live): the records
// decoded after it, an Info among them, are skipped with the rest of the
// block, as if the block had been decoded in one go, and the next block's
// events keep the unit of the Info before the damage.
func TestAddressDamageSkipsWhatFollows(t *testing.T) {
	info := func(unit int) []byte { return rec(KindInfo, int64(0), unit, "", "", 0, 0) }
	a := alloc(16, step(0x1000))
	data := craftFile(
		block(recs(info(10), rec(KindTime, 1), events(3), info(1000), rec(KindString, 1, "s"), rec(KindTime, 1), events(1)),
			a, free(1), free(1), a),
		block(recs(rec(KindTime, 2), events(1), endRec), a))
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		var d *DamageError
		switch {
		case errors.As(err, &d):
			got = append(got, "damage: "+d.Reason)
		case err != nil:
			t.Fatal(err)
		case rec.Kind.IsEvent():
			got = append(got, fmt.Sprintf("%v@%d", rec.Kind, rec.Event.Time))
		default:
			got = append(got, rec.Kind.String())
		}
	}
	want := []string{"info", "alloc@10", "free@10",
		"damage: events record at byte 9 of the records stream: event 3 of 3: handle 1 is not live (reference code 18)",
		"alloc@20", "end"}
	if !slices.Equal(got, want) {
		t.Errorf("read\n%q\nwant\n%q", got, want)
	}
}

// TestSetUnitOfCutBatch corrects the times of a batch that damage cut
// short after the first of its marks.
func TestSetUnitOfCutBatch(t *testing.T) {
	b := &batch{events: make([]Event, 2), inherited: 2, assumedUnit: 7,
		marks: []timeMark{{at: 0, units: 1}, {at: 1, units: 2}, {at: 3, units: 5}}}
	b.setUnit(10)
	if b.events[0].Time != 10 || b.events[1].Time != 20 {
		t.Errorf("times %d and %d, want 10 and 20", b.events[0].Time, b.events[1].Time)
	}
}
