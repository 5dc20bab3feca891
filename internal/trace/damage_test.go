package trace_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
	"github.com/memtrail/memtrail/internal/trace/tracetext"
)

const (
	fileHeaderSize  = 16
	blockHeaderSize = 20
)

// blockOffsets returns the offsets of the blocks of a sound trace file,
// read from their headers.
func blockOffsets(t testing.TB, data []byte) []int {
	t.Helper()
	var offsets []int
	for off := fileHeaderSize; off < len(data); {
		if len(data)-off < blockHeaderSize {
			t.Fatalf("partial block header at %d", off)
		}
		offsets = append(offsets, off)
		off += blockHeaderSize + int(binary.LittleEndian.Uint32(data[off+8:]))
	}
	return offsets
}

// storedStreams are the streams of a block as stored.
type storedStreams struct {
	stored     [][]byte
	compressed []int // indexes of the streams stored compressed
}

// blockStreams returns the streams of the sound block at off.
func blockStreams(t testing.TB, data []byte, off int) storedStreams {
	t.Helper()
	payload := data[off+blockHeaderSize : off+blockHeaderSize+int(binary.LittleEndian.Uint32(data[off+8:]))]
	var s storedStreams
	if len(payload) == 0 {
		return s
	}
	n, i := binary.Uvarint(payload)
	for k := range int(n) {
		_, m := binary.Uvarint(payload[i:])
		i += m
		stored, m := binary.Uvarint(payload[i:])
		i += m
		if payload[i] != 0 {
			s.compressed = append(s.compressed, k)
		}
		i++
		s.stored = append(s.stored, payload[i:i+int(stored)])
		i += int(stored)
	}
	if i != len(payload) {
		t.Fatalf("block at %d: stream table does not fill the payload", off)
	}
	return s
}

// result is everything a Reader returned for a file, errors included, as
// text that tests can compare.
type result struct {
	records []string // records of each block, in text form
	damage  []*trace.DamageError
	end     error // the error that ended reading: io.EOF, ErrIncomplete, ...
}

// readDamaged reads a trace to the end, going on after damage. It fails the
// test if the Reader does not come to an end.
func readDamaged(t testing.TB, data []byte) result {
	t.Helper()
	var res result
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		res.end = err
		return res
	}
	for calls := 0; ; calls++ {
		if calls > 2*len(data)+10 {
			t.Fatalf("reader does not come to an end")
		}
		rec, err := r.Next()
		var damage *trace.DamageError
		switch {
		case errors.As(err, &damage):
			res.damage = append(res.damage, damage)
		case err != nil:
			res.end = err
			if errors.Is(err, trace.ErrIncomplete) {
				if _, err := r.Next(); err != io.EOF {
					t.Fatalf("after ErrIncomplete: %v, want io.EOF", err)
				}
			}
			return res
		default:
			res.records = append(res.records, tracetext.Format([]trace.Record{rec}))
		}
	}
}

// smallTrace is a trace of several blocks whose records tell which block
// they are in. Its blocks are stored raw, unless compressible is set: then
// they are compressed.
func smallTrace(t testing.TB, compressible bool) (data []byte, perBlock [][]string) {
	var b strings.Builder
	b.WriteString("info time-unit=1 command=[prog]\n")
	value, blockSize := "s", 24
	if compressible {
		value, blockSize = strings.Repeat("abcd", 30), 150
	}
	for i := range 6 {
		fmt.Fprintf(&b, "string id=%d value=%s%d\n", i+1, value, i)
		fmt.Fprintf(&b, "alloc process=1 thread=1 time=%d api=malloc addr=0x%x size=%d stack=%d\n", i*10, 0x1000+i*16, 8*i, i)
	}
	b.WriteString("end time=50 events=6\n")
	data = encode(t, b.String(), blockSize, false)
	compressed := 0
	for _, off := range blockOffsets(t, data) {
		if len(blockStreams(t, data, off).compressed) > 0 {
			compressed++
		}
	}
	if compressible && compressed < 3 || !compressible && compressed > 0 {
		t.Fatalf("%d blocks compressed", compressed)
	}
	// Read each block alone to learn which records it holds.
	offsets := append(blockOffsets(t, data), len(data))
	for i := range len(offsets) - 1 {
		alone := append(append([]byte(nil), data[:fileHeaderSize]...), data[offsets[i]:offsets[i+1]]...)
		perBlock = append(perBlock, readDamaged(t, alone).records)
	}
	return data, perBlock
}

func flatten(blocks [][]string) []string {
	var all []string
	for _, b := range blocks {
		all = append(all, b...)
	}
	return all
}

func TestSmallTraceShape(t *testing.T) {
	for _, compressible := range []bool{false, true} {
		testSmallTraceShape(t, compressible)
	}
}

func testSmallTraceShape(t *testing.T, compressible bool) {
	data, perBlock := smallTrace(t, compressible)
	if len(perBlock) < 4 {
		t.Fatalf("small trace has %d blocks, want at least 4", len(perBlock))
	}
	res := readDamaged(t, data)
	if res.end != io.EOF || len(res.damage) > 0 {
		t.Fatalf("sound trace read with %v, damage %v", res.end, res.damage)
	}
	if !equalStrings(res.records, flatten(perBlock)) {
		t.Fatalf("blocks read alone differ from the whole trace")
	}
}

// TestTruncateEverywhere cuts a trace at every byte: the blocks before the
// cut are read, the cut is reported, nothing panics.
func TestTruncateEverywhere(t *testing.T) {
	for _, compressible := range []bool{false, true} {
		testTruncateEverywhere(t, compressible)
	}
}

func testTruncateEverywhere(t *testing.T, compressible bool) {
	data, perBlock := smallTrace(t, compressible)
	offsets := append(blockOffsets(t, data), len(data))
	for n := 0; n <= len(data); n++ {
		res := readDamaged(t, data[:n])
		if n < fileHeaderSize {
			if !errors.Is(res.end, trace.ErrNotTrace) {
				t.Errorf("cut at %d: %v, want ErrNotTrace", n, res.end)
			}
			continue
		}
		complete := 0 // blocks entirely before the cut
		for complete < len(perBlock) && offsets[complete+1] <= n {
			complete++
		}
		if want := flatten(perBlock[:complete]); !equalStrings(res.records, want) {
			t.Errorf("cut at %d: read\n%s\nwant\n%s", n, strings.Join(res.records, ""), strings.Join(want, ""))
		}
		switch {
		case n == len(data):
			if res.end != io.EOF || len(res.damage) > 0 {
				t.Errorf("whole file: %v, damage %v", res.end, res.damage)
			}
		case n == offsets[complete]:
			if !errors.Is(res.end, trace.ErrIncomplete) || len(res.damage) > 0 {
				t.Errorf("cut at block boundary %d: %v, damage %v; want ErrIncomplete only", n, res.end, res.damage)
			}
		default:
			want := &trace.DamageError{Offset: int64(offsets[complete]), BytesSkipped: int64(n - offsets[complete]),
				Reason: "last block incomplete", Truncated: true}
			if len(res.damage) != 1 || *res.damage[0] != *want || res.end != io.EOF {
				t.Errorf("cut at %d inside a block: damage %v, end %v; want %v then EOF", n, res.damage, res.end, want)
			}
		}
	}
}

// TestFlipEveryByte damages each byte of a trace in turn: exactly the block
// holding it is lost and reported, the others are read.
func TestFlipEveryByte(t *testing.T) {
	for _, compressible := range []bool{false, true} {
		testFlipEveryByte(t, compressible)
	}
}

func testFlipEveryByte(t *testing.T, compressible bool) {
	data, perBlock := smallTrace(t, compressible)
	offsets := append(blockOffsets(t, data), len(data))
	for i := range data {
		damaged := bytes.Clone(data)
		damaged[i] ^= 0xff
		res := readDamaged(t, damaged)
		switch {
		case i < 8:
			if !errors.Is(res.end, trace.ErrNotTrace) {
				t.Errorf("magic damaged at %d: %v, want ErrNotTrace", i, res.end)
			}
			continue
		case i < 10:
			var v *trace.VersionError
			if !errors.As(res.end, &v) {
				t.Errorf("version damaged at %d: %v, want a VersionError", i, res.end)
			}
			continue
		case i < fileHeaderSize:
			// Flags and reserved bytes are for later versions to use.
			if res.end != io.EOF || !equalStrings(res.records, flatten(perBlock)) {
				t.Errorf("reserved header byte %d damaged: records or end (%v) differ", i, res.end)
			}
			continue
		}
		block := 0
		for offsets[block+1] <= i {
			block++
		}
		lost := append(append([][]string(nil), perBlock[:block]...), perBlock[block+1:]...)
		if want := flatten(lost); !equalStrings(res.records, want) {
			t.Errorf("byte %d (block %d) damaged: read\n%s\nwant\n%s", i, block, strings.Join(res.records, ""), strings.Join(want, ""))
		}
		if len(res.damage) != 1 || res.damage[0].Offset != int64(offsets[block]) ||
			res.damage[0].BytesSkipped != int64(offsets[block+1]-offsets[block]) {
			t.Errorf("byte %d (block %d at %d..%d) damaged: reported %v", i, block, offsets[block], offsets[block+1], res.damage)
		}
		// The damage report says the file did not end cleanly, even when
		// the End record was in the block lost: no ErrIncomplete.
		if res.end != io.EOF {
			t.Errorf("byte %d (block %d) damaged: reading ended with %v, want io.EOF", i, block, res.end)
		}
	}
}

// TestCorruptMiddleBlock corrupts one block in the middle of a big
// compressed trace: the blocks after it are read, and the report says where
// the damage is and how much was skipped.
func TestCorruptMiddleBlock(t *testing.T) {
	events := manyEvents(200000)
	data := writeEvents(t, events, 256<<10, false)
	offsets := append(blockOffsets(t, data), len(data))
	if len(offsets) < 5 {
		t.Fatalf("trace has %d blocks, want at least 4", len(offsets)-1)
	}
	damaged := bytes.Clone(data)
	copy(damaged[offsets[2]+blockHeaderSize+1000:], "scribbled over by a stray write")

	r, err := trace.NewReader(bytes.NewReader(damaged))
	if err != nil {
		t.Fatal(err)
	}
	var got []trace.Event
	var damage []*trace.DamageError
	for {
		rec, err := r.Next()
		var d *trace.DamageError
		if errors.As(err, &d) {
			damage = append(damage, d)
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind.IsEvent() {
			got = append(got, asWritten(rec.Event))
		}
	}
	want := &trace.DamageError{Offset: int64(offsets[2]), BytesSkipped: int64(offsets[3] - offsets[2]), Reason: "crc mismatch"}
	if len(damage) != 1 || *damage[0] != *want {
		t.Fatalf("damage reported: %v, want %v", damage, want)
	}
	if got, wantMsg := damage[0].Error(), fmt.Sprintf("trace damaged at byte %d: crc mismatch; skipped %d bytes", want.Offset, want.BytesSkipped); got != wantMsg {
		t.Errorf("damage message %q, want %q", got, wantMsg)
	}
	// The events of block 2 are lost, and only those: the blocks before
	// and after are read whole.
	lost := len(events) - len(got)
	if lost <= 0 || lost > len(events)/3 {
		t.Fatalf("lost %d of %d events", lost, len(events))
	}
	a := 0 // the first event lost
	for a < len(got) && got[a] == events[a] {
		a++
	}
	if a == 0 || a == len(got) || !sameEvents(got[a:], events[a+lost:]) {
		t.Errorf("events read are not those written less one run of %d lost at %d", lost, a)
	}
}

// TestGarbageBetweenBlocks inserts bytes that are not a block, including a
// false block magic, between two blocks.
func TestGarbageBetweenBlocks(t *testing.T) {
	data, perBlock := smallTrace(t, false)
	offsets := blockOffsets(t, data)
	garbage := []byte("MTBK\x01\x00\x00\x00\x05\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00junkMTBKMT")
	at := offsets[2]
	damaged := append(append(append([]byte(nil), data[:at]...), garbage...), data[at:]...)
	res := readDamaged(t, damaged)
	if !equalStrings(res.records, flatten(perBlock)) {
		t.Errorf("records around the garbage were not all read")
	}
	want := &trace.DamageError{Offset: int64(at), BytesSkipped: int64(len(garbage)), Reason: "crc mismatch"}
	if len(res.damage) != 1 || *res.damage[0] != *want {
		t.Errorf("damage reported: %v, want %v", res.damage, want)
	}
}

func TestNotTrace(t *testing.T) {
	for _, tc := range []struct {
		data string
		msg  string
	}{
		{"", "empty file: not a memtrail trace"},
		{"memtr", "file of 5 bytes is too short for a trace header: not a memtrail trace"},
		{"#!/bin/sh\necho hello\n", "not a memtrail trace"},
		{"hello", "not a memtrail trace"},
	} {
		_, err := trace.NewReader(strings.NewReader(tc.data))
		if !errors.Is(err, trace.ErrNotTrace) || err.Error() != tc.msg {
			t.Errorf("NewReader(%q) = %v, want %q", tc.data, err, tc.msg)
		}
	}
}

func TestUnknownVersion(t *testing.T) {
	data := []byte("memtrail\x03\x00\x00\x00\x00\x00\x00\x00")
	_, err := trace.NewReader(bytes.NewReader(data))
	var v *trace.VersionError
	if !errors.As(err, &v) || v.Version != 3 {
		t.Fatalf("NewReader = %v, want a VersionError for version 3", err)
	}
	if want := "unsupported trace version 3 (this memtrail reads versions 1 to 2)"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

// errReader returns data, then fails.
type errReader struct {
	data []byte
	err  error
}

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestReadError(t *testing.T) {
	data, perBlock := smallTrace(t, false)
	offsets := blockOffsets(t, data)
	failure := errors.New("input/output error")
	r, err := trace.NewReader(&errReader{data: data[:offsets[2]], err: failure})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		_, err := r.Next()
		if err != nil {
			if !errors.Is(err, failure) {
				t.Fatalf("Next = %v, want %v", err, failure)
			}
			break
		}
		n++
	}
	if want := len(flatten(perBlock[:2])); n != want {
		t.Errorf("read %d records before the error, want %d", n, want)
	}
	if _, err := r.Next(); !errors.Is(err, failure) {
		t.Errorf("Next after the error = %v, want it again", err)
	}
}

func equalStrings(a, b []string) bool {
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

func sameEvents(a, b []trace.Event) bool {
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
