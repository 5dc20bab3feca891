package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// These tests build blocks byte by byte, to get what no sound Writer
// writes: unknown kinds, bad codes, and damage under a valid CRC.

// craftFile returns a trace file with a block for each set of streams,
// stored raw.
func craftFile(blocks ...streamSet) []byte {
	data := []byte(Magic + "\x01\x00\x00\x00\x00\x00\x00\x00")
	for _, s := range blocks {
		data, _ = appendBlock(data, &s, false, nil)
	}
	return data
}

// craftPayload returns a block with a payload given byte by byte, a raw
// length of raw, and a CRC that fits.
func craftPayload(raw uint32, payload []byte) []byte {
	h := blockHeader{layout: layoutStreams, stored: uint32(len(payload)), raw: raw, crc: crc32Of(payload)}
	return append(h.appendTo(nil), payload...)
}

// rec encodes a record from its kind and fields: uint64s and ints are
// written as uvarints, int64s as signed varints, strings with their length,
// and bytes and []bytes as they are.
func rec(k Kind, fields ...any) []byte {
	b := []byte{byte(k)}
	for _, f := range fields {
		switch f := f.(type) {
		case int:
			b = binary.AppendUvarint(b, uint64(f))
		case uint64:
			b = binary.AppendUvarint(b, f)
		case int64:
			b = binary.AppendVarint(b, f)
		case string:
			b = appendString(b, f)
		case []byte:
			b = append(b, f...)
		case byte:
			b = append(b, f)
		default:
			panic("rec: bad field type")
		}
	}
	return b
}

// skippable encodes a skippable record: its kind, the length of its body,
// and its body, of fields encoded as rec encodes them.
func skippable(k Kind, fields ...any) []byte {
	body := rec(k, fields...)[1:]
	return append(rec(k, len(body)), body...)
}

func crc32Of(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func uvs(vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

// col returns the values of the varint column k as they are stored: their
// low bits in k, the rest in k's tails.
func col(k int, vs ...uint64) part {
	var p part
	for _, v := range vs {
		if v < 0x80 {
			p[k] = append(p[k], byte(v))
			continue
		}
		p[k] = append(p[k], byte(v)|0x80)
		p[k+tailStreams] = binary.AppendUvarint(p[k+tailStreams], v>>7)
	}
	return p
}

// A part is a piece of a block: bytes for some of its streams. block joins
// parts stream by stream, so that a part can hold a whole event.
type part = streamSet

func block(parts ...part) streamSet {
	var s streamSet
	for _, p := range parts {
		for i := range p {
			s[i] = append(s[i], p[i]...)
		}
	}
	return s
}

func recs(rs ...[]byte) part { return part{streamRecords: bytes.Join(rs, nil)} }

// events is an Events record for n events.
func events(n int) []byte { return rec(kindEvents, n) }

// alloc is an alloc of size bytes with address code code, with a stack one
// more than the event's before it.
func alloc(size, code uint64) part {
	return block(part{streamOps: {opAlloc<<opShift | byte(APIMalloc)}, streamStack: {2}},
		col(streamSize, size), col(streamAddr, code))
}

// free is a free of the block with handle h, or with h 0 an escape to
// the raw addresses given.
func free(h uint64, raw ...uint64) part {
	code := uint64(refEscape)
	if h != 0 {
		code = refHandle + h - 1
	}
	return freeCode(code, raw...)
}

// freeCode is a free with reference code code.
func freeCode(code uint64, raw ...uint64) part {
	return block(part{streamOps: {opFree<<opShift | byte(APIFree)}, streamStack: {2}},
		col(streamRef, code), col(streamRawAddr, raw...))
}

// without returns p with column k and its tails emptied.
func without(p part, k int) part {
	p[k] = nil
	if k >= streamSize {
		p[k+tailStreams] = nil
	}
	return p
}

// step is the address code for a step of d bytes from next.
func step(d int64) uint64 {
	v, ok := stepValue(uint64(d))
	if !ok {
		panic("step too long")
	}
	return addrStep + 2*v
}

// depth is the address code for the address at depth d in the thread's
// class list.
func depth(d uint64) uint64 { return addrDepth + 2*d }

// allocSource is an alloc of size bytes at depth d in the class list of
// the thread's source thread.
func allocSource(size, d uint64) part {
	return block(part{streamOps: {opAlloc<<opShift | byte(APIMalloc)}, streamStack: {2}},
		col(streamSize, size), col(streamAddr, addrSource, d))
}

var (
	infoRec = rec(KindInfo, int64(0), 1, "", "", 0, 0)
	endRec  = rec(KindEnd, 0, 0)
	infoEnd = recs(infoRec, endRec)
)

// outcome reads a crafted file and returns its records in a short text
// form: events as kind(process,thread)@address, damage as
// "damage@offset+skipped". It also returns the reasons of the damage.
func outcome(t *testing.T, data []byte) (string, []string) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var out, reasons []string
	for range 1000 {
		rec, err := r.Next()
		var d *DamageError
		switch {
		case errors.As(err, &d):
			out = append(out, fmt.Sprintf("damage@%d+%d", d.Offset, d.BytesSkipped))
			reasons = append(reasons, d.Reason)
			continue
		case err == io.EOF:
			return strings.Join(out, " "), reasons
		case err != nil:
			return strings.Join(append(out, err.Error()), " "), reasons
		}
		s := rec.Kind.String()
		if rec.Kind.IsEvent() {
			s += fmt.Sprintf("(%d,%d)@%#x", rec.Event.Process, rec.Event.Thread, rec.Event.Addr)
		}
		out = append(out, s)
	}
	t.Fatal("reader does not come to an end")
	return "", nil
}

// fileOffsets returns the offsets of the blocks of a sound file.
func fileOffsets(data []byte) []int {
	var offsets []int
	for off := fileHeaderSize; off+blockHeaderSize <= len(data); {
		offsets = append(offsets, off)
		off += blockHeaderSize + int(binary.LittleEndian.Uint32(data[off+8:]))
	}
	return offsets
}

var blockRef = regexp.MustCompile(`@B(\d+)`)

// expand replaces @Bn in want by the offset of block n of data.
func expand(want string, data []byte) string {
	offsets := fileOffsets(data)
	return blockRef.ReplaceAllStringFunc(want, func(s string) string {
		n, _ := strconv.Atoi(s[2:])
		if n >= len(offsets) {
			return s
		}
		return "@" + strconv.Itoa(offsets[n])
	})
}

type craftCase struct {
	name   string
	blocks []streamSet
	want   string // with @Bn for the offset of block n
	reason string // in the first damage reported
}

func runCrafted(t *testing.T, cases []craftCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := craftFile(tc.blocks...)
			got, reasons := outcome(t, data)
			if want := expand(tc.want, data); got != want {
				t.Errorf("read %q, want %q (damage: %q)", got, want, reasons)
			}
			if tc.reason != "" && (len(reasons) == 0 || !strings.Contains(reasons[0], tc.reason)) {
				t.Errorf("damage %q, want it to say %q", reasons, tc.reason)
			}
		})
	}
}

func TestCraftedRecords(t *testing.T) {
	a := alloc(16, step(0x1000))
	runCrafted(t, []craftCase{
		{"skippable kind", []streamSet{block(recs(infoRec, rec(0x4e, 3, []byte{1, 2, 3}), events(1), rec(0x7f, 0), endRec), a)},
			"info alloc(0,0)@0x1000 end", ""},
		{"skippable kind too long", []streamSet{block(recs(infoRec, rec(0x4e, 100, []byte{1}))), block(recs(events(1), endRec), a)},
			"info damage@B0+3 alloc(0,0)@0x1000 end", "length 100 runs past"},
		{"type", []streamSet{block(recs(infoRec, skippable(KindType, 1, 204, "widget"), events(1), endRec), a)},
			"info type alloc(0,0)@0x1000 end", ""},
		{"type with a field of a later version", []streamSet{block(recs(infoRec, skippable(KindType, 1, 204, "widget", 7, "more"), endRec))},
			"info type end", ""},
		{"type fields past its length", []streamSet{block(recs(infoRec, rec(KindType, 3, 1, 204, "widget"), events(1)), a), block(recs(events(1), endRec), a)},
			"info damage@B0+" + itoa(len(rec(KindType, 3, 1, 204, "widget"))+2+5) + " alloc(0,0)@0x1000 end", "type record at byte 7 of the records stream: its fields do not fit in its length of 3 bytes"},
		{"type fields over 64 bits", []streamSet{block(recs(infoRec, rec(KindType, 11, bytes.Repeat([]byte{0xff}, 10), byte(1)))), block(infoEnd)},
			"info damage@B0+13 info end", "its fields do not fit in its length of 11 bytes"},
		{"type longer than the block", []streamSet{block(recs(infoRec, rec(KindType, 100, 1, 2, "x"))), block(infoEnd)},
			"info damage@B0+" + itoa(len(rec(KindType, 100, 1, 2, "x"))) + " info end", "length 100 runs past"},
		{"unknown fixed kind", []streamSet{block(recs(infoRec, rec(0x20, 1), events(1)), a), block(recs(events(1), endRec), a)},
			"info damage@B0+9 alloc(0,0)@0x1000 end", "kind(0x20) record"}, // 2+2 bytes of records, 5 of a
		{"retired free kind", []streamSet{block(recs(infoRec, rec(0x12, 5, byte(5), int64(16), int64(1)))), block(infoEnd)},
			"info damage@B0+5 info end", "kind(0x12) record at byte 7 of the records stream: unknown record kind"},
		{"retired realloc kind", []streamSet{block(recs(infoRec, rec(0x13, 5))), block(infoEnd)},
			"info damage@B0+2 info end", "kind(0x13)"},
		{"kind above skippable range", []streamSet{block(recs(infoRec, []byte{0x80})), block(recs(endRec))},
			"info damage@B0+1 end", ""},
		{"kind zero", []streamSet{{}, block(recs([]byte{0}, events(1)), a), block(recs(endRec))},
			"damage@B1+8 end", ""},
		{"record past end of block", []streamSet{block(recs(infoRec, rec(KindThread, 1, 1))), block(recs(endRec))},
			"info damage@B0+3 end", "runs past the end"},
		{"string longer than block", []streamSet{block(recs(infoRec, rec(KindString, 1, 1<<40))), block(recs(endRec))},
			"info damage@B0+8 end", ""},
		{"huge frame count", []streamSet{block(recs(infoRec, rec(KindSymbol, 1, 2, uint64(1)<<62, 1, 2, 3))), block(recs(endRec))},
			"info damage@B0+" + itoa(len(rec(KindSymbol, 1, 2, uint64(1)<<62, 1, 2, 3))) + " end", ""},
		{"huge segment count", []streamSet{block(recs(infoRec, rec(KindModule, 1, 1, 1, 0, 0, 1000, 1, 2, 3, 4))), block(recs(endRec))},
			"info damage@B0+" + itoa(len(rec(KindModule, 1, 1, 1, 0, 0, 1000, 1, 2, 3, 4))) + " end", ""},
		{"huge args count", []streamSet{block(recs(infoRec, rec(KindProcessStart, 1, 2, 3, 0, 0, "exe", 5, "a"))), block(recs(endRec))},
			"info damage@B0+" + itoa(len(rec(KindProcessStart, 1, 2, 3, 0, 0, "exe", 5, "a"))) + " end", ""},
		{"varint over 64 bits", []streamSet{block(recs(infoRec, rec(KindString, bytes.Repeat([]byte{0xff}, 10), byte(1)))), block(recs(endRec))},
			"info damage@B0+12 end", "varint overflows"},
		{"time unit zero", []streamSet{block(recs(rec(KindInfo, int64(0), 0, "", "", 0, 0))), block(recs(endRec))},
			"damage@B0+" + itoa(len(infoRec)) + " end", "time unit is 0"},
		{"context", []streamSet{block(recs(infoRec, events(1), rec(KindContext, 3, 4), events(1)), a, a), block(recs(events(1), endRec), a)},
			"info alloc(0,0)@0x1000 alloc(3,4)@0x1000 alloc(0,0)@0x1000 end", ""},
		{"time record cut short", []streamSet{block(recs(infoRec, events(1), []byte{byte(KindTime)}), a), block(recs(endRec))},
			"info alloc(0,0)@0x1000 damage@B0+1 end", "time record at byte 9 of the records stream: runs past the end"},
		{"time record over 64 bits", []streamSet{block(recs(infoRec, rec(KindTime, bytes.Repeat([]byte{0xff}, 10), byte(1)), events(1)), a), block(recs(endRec))},
			"info damage@B0+19 end", "time record at byte 7 of the records stream: varint overflows"}, // 12 + 2 bytes of records, 5 of a
		{"events of no events", []streamSet{block(recs(infoRec, events(0), endRec))},
			"info end", ""},
		{"records after end", []streamSet{block(recs(infoRec, endRec, events(1)), a), block(recs(events(1)), a)},
			"info end", ""},
		{"no end", []streamSet{block(recs(infoRec, events(1)), a)},
			"info alloc(0,0)@0x1000 " + ErrIncomplete.Error(), ""},
		{"no end after damage", []streamSet{block(recs(infoRec)), block(recs(events(1), rec(0x20)), a)},
			"info alloc(0,0)@0x1000 damage@B1+1", ""}, // End may have been in what was lost
		{"no end after damage and a sound block", []streamSet{block(recs(infoRec, rec(0x20))), block(recs(events(1)), a)},
			"info damage@B0+1 alloc(0,0)@0x1000 " + ErrIncomplete.Error(), ""},
		{"empty blocks", []streamSet{{}, block(recs(infoRec)), {}, block(recs(endRec))},
			"info end", ""},
	})
}

// TestCraftedType checks the fields of Type records, one with bytes after
// its fields that a later version may have added.
func TestCraftedType(t *testing.T) {
	data := craftFile(block(recs(infoRec,
		skippable(KindType, 1, 204, "widget", 7, "more"),
		skippable(KindType, uint64(1)<<63, uint64(1)<<40, ""),
		rec(0x4e, 0),
		skippable(KindType, 3, 1, "ns::Box<char>"),
		endRec)))
	want := []Type{{Object: 1, Size: 204, Name: "widget"}, {Object: 1 << 63, Size: 1 << 40}, {Object: 3, Size: 1, Name: "ns::Box<char>"}}
	var got []Type
	for _, rec := range readRecords(t, data) {
		if rec.Kind == KindType {
			got = append(got, *rec.Type)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("read types %+v, want %+v", got, want)
	}
}

// TestCraftedStackCalls checks the fields of StackCalls and DeepestStack
// records, with bytes after their fields that a later version may add,
// and that fields past a record's length are damage.
func TestCraftedStackCalls(t *testing.T) {
	data := craftFile(block(recs(infoRec,
		skippable(KindStackCalls, 1, 2, 3000, 4816, 48, 2001),
		skippable(KindStackCalls, 1, 2, 4000, 96, 96, 7, 9, "later"),
		skippable(KindDeepestStack, 1, 2, 3500, 4816, 17, 3, 736, 4000, 80),
		skippable(KindDeepestStack, 1, 1, 5, 64, 0, 0, 1),
		endRec)))
	wantCalls := []StackCalls{{1, 2, 3000, 4816, 48, 2001}, {1, 2, 4000, 96, 96, 7}}
	wantDeepest := []DeepestStack{{1, 2, 3500, 4816, 17, []uint64{736, 4000, 80}}, {1, 1, 5, 64, 0, nil}}
	var calls []StackCalls
	var deepest []DeepestStack
	for _, rec := range readRecords(t, data) {
		switch rec.Kind {
		case KindStackCalls:
			calls = append(calls, *rec.StackCalls)
		case KindDeepestStack:
			deepest = append(deepest, *rec.DeepestStack)
		}
	}
	if !slices.Equal(calls, wantCalls) {
		t.Errorf("read stack calls %+v, want %+v", calls, wantCalls)
	}
	if len(deepest) != len(wantDeepest) {
		t.Fatalf("read deepest stacks %+v, want %+v", deepest, wantDeepest)
	}
	for i := range deepest {
		d, w := deepest[i], wantDeepest[i]
		if d.Process != w.Process || d.Thread != w.Thread || d.Time != w.Time || d.Bytes != w.Bytes || d.Stack != w.Stack ||
			!slices.Equal(d.FrameSizes, w.FrameSizes) {
			t.Errorf("deepest stack %d: %+v, want %+v", i, d, w)
		}
	}
	// The example of docs/format.md.
	if got, want := fmt.Sprintf("% x", skippable(KindStackCalls, 1, 1, 12000, 4816, 48, 2001)), "41 09 01 01 e0 5d d0 25 30 d1 0f"; got != want {
		t.Errorf("the documented StackCalls record is %s, want %s", got, want)
	}
	a := alloc(16, step(0x1000))
	short := rec(KindDeepestStack, 6, 1, 1, 5, 64, 0, 9)
	runCrafted(t, []craftCase{
		{"stack calls fields past its length", []streamSet{block(recs(infoRec, rec(KindStackCalls, 3, 1, 2, 3))), block(recs(events(1), endRec), a)},
			"info damage@B0+" + itoa(len(rec(KindStackCalls, 3, 1, 2, 3))) + " alloc(0,0)@0x1000 end", "stack-calls record at byte 7 of the records stream: its fields do not fit in its length of 3 bytes"},
		{"deepest stack with more frames than its length", []streamSet{block(recs(infoRec, short)), block(recs(events(1), endRec), a)},
			"info damage@B0+" + itoa(len(short)) + " alloc(0,0)@0x1000 end", "deepest-stack record at byte 7 of the records stream: its fields do not fit in its length of 6 bytes"},
	})
}

// readRecords reads every record of a crafted trace, which must be sound.
func readRecords(t *testing.T, data []byte) []Record {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
}

// TestCraftedTime checks Time records: they move the time of the events
// after them on, in units of Info's time unit, from 0 at the start of every
// block; they are not returned.
func TestCraftedTime(t *testing.T) {
	info := rec(KindInfo, int64(0), 10, "", "", 0, 0)
	a := alloc(16, step(0x1000))
	data := craftFile(
		block(recs(info, events(1), rec(KindTime, 5), events(2), rec(KindTime, 0), rec(KindTime, 300), events(1)), a, a, a, a),
		block(recs(events(1), rec(KindTime, 2), events(1), endRec), a, a))
	var times []uint64
	for _, rec := range readRecords(t, data) {
		switch {
		case rec.Kind.IsEvent():
			times = append(times, rec.Event.Time)
		case rec.Kind != KindInfo && rec.Kind != KindEnd:
			t.Errorf("read a %v record", rec.Kind)
		}
	}
	if want := []uint64{0, 50, 50, 3050, 0, 20}; !slices.Equal(times, want) {
		t.Errorf("event times %v, want %v", times, want)
	}
}

// TestCraftedSourceDepths decodes a run of many addrSource codes, each
// with its depth after it in the address column: the run is long enough
// to be decoded column by column, where a depth takes a value more than
// the events count.
func TestCraftedSourceDepths(t *testing.T) {
	const n = 40
	parts := []part{recs(infoRec, events(3*n), endRec), alloc(16, step(0x1000))}
	var want []string
	for i := range n {
		if i > 0 {
			parts = append(parts, alloc(16, step(0)))
		}
		want = append(want, fmt.Sprintf("alloc(0,0)@%#x", 0x1000+32*i))
	}
	for i := range n {
		parts = append(parts, free(uint64(i+1)))
		want = append(want, fmt.Sprintf("free(0,0)@%#x", 0x1000+32*i))
	}
	for i := range n {
		parts = append(parts, allocSource(16, 0))
		want = append(want, fmt.Sprintf("alloc(0,0)@%#x", 0x1000+32*(n-1-i)))
	}
	runCrafted(t, []craftCase{{"source depths", []streamSet{block(parts...)},
		"info " + strings.Join(want, " ") + " end", ""}})
}

// TestCraftedEvents checks the decoding of the event streams: damage in
// each of them is reported, ends the block, and the next block is read.
func TestCraftedEvents(t *testing.T) {
	a := alloc(16, step(0x1000))               // 5 bytes: the address code has a tail
	after := block(recs(events(1), endRec), a) // a sound block to read after the damage
	damaged := func(name string, reason string, skipped int, parts ...part) craftCase {
		return craftCase{name, []streamSet{block(parts...), after},
			"info damage@B0+" + itoa(skipped) + " alloc(0,0)@0x1000 end", reason}
	}
	runCrafted(t, []craftCase{
		damaged("count past the ops stream", "count 2 is more than the 1 events left in the ops stream", 7,
			recs(infoRec, events(2)), a),
		damaged("op without kind", "op byte 0x01 has no event kind", 4,
			recs(infoRec, events(1)), part{streamOps: {0x01}, streamSize: {1}, streamAddr: {1}, streamStack: {0}}),
		damaged("op of kind 4", "op byte 0x81 has no event kind", 1,
			recs(infoRec, events(1)), part{streamOps: {0x81}}),
		damaged("op of kind 4 with values", "op byte 0x81 has no event kind", 5,
			recs(infoRec, events(1)), part{streamOps: {0x81}, streamSize: {1}, streamAddr: {1}, streamRef: {1}, streamStack: {0}}),
		damaged("ops stream runs out", "count 1 is more than the 0 events left in the ops stream", 6,
			recs(infoRec, events(1)), without(a, streamOps)),
		damaged("size stream runs out", "the size stream runs out", 4, recs(infoRec, events(1)), without(a, streamSize)),
		damaged("addr stream runs out", "the addr stream runs out", 3, recs(infoRec, events(1)), without(a, streamAddr)),
		damaged("stack stream runs out", "the stack stream runs out", 4, recs(infoRec, events(1)), without(a, streamStack)),
		damaged("ref stream runs out", "the ref stream runs out", 2, recs(infoRec, events(1)), without(free(1), streamRef)),
		damaged("raw stream runs out", "the raw stream runs out", 3, recs(infoRec, events(1)), free(0)),
		damaged("value over 64 bits", "the size tails stream runs out or holds a varint of more than 64 bits", 14,
			recs(infoRec, events(1)), without(a, streamSize), part{streamSize: {0xff}, streamSize + tailStreams: uvs(1 << 57)}),
		damaged("varint over 64 bits", "the size tails stream runs out or holds a varint of more than 64 bits", 16,
			recs(infoRec, events(1)), without(a, streamSize), part{streamSize: {0xff}, streamSize + tailStreams: append(bytes.Repeat([]byte{0xff}, 10), 1)}),
		damaged("pop of an empty class list", "address code 3 for size 16: its class list is empty", 4,
			recs(infoRec, events(1)), alloc(16, depth(0))),
		{"pop of another class's list", []streamSet{block(recs(infoRec, events(3)), alloc(16, step(0x1000)), free(1), alloc(40, depth(0))), after},
			"info alloc(0,0)@0x1000 free(0,0)@0x1000 damage@B0+4 alloc(0,0)@0x1000 end", "address code 3 for size 40: its class list is empty"},
		{"deeper than the class list", []streamSet{block(recs(infoRec, events(3)), alloc(16, step(0x1000)), free(1), alloc(16, depth(1))), after},
			"info alloc(0,0)@0x1000 free(0,0)@0x1000 damage@B0+4 alloc(0,0)@0x1000 end", "address code 5 for size 16: deeper than its class list"},
		{"a size with no class list", []streamSet{block(recs(infoRec, events(1)), alloc(5000, depth(0))), after},
			"info damage@B0+5 alloc(0,0)@0x1000 end", "address code 3 for size 5000: a size with no class list"},
		{"source depth missing", []streamSet{block(recs(infoRec, events(3)), alloc(16, step(0x1000)), free(1), allocSource(16, 1)), after},
			"info alloc(0,0)@0x1000 free(0,0)@0x1000 damage@B0+5 alloc(0,0)@0x1000 end", "address code 2, depth 1 for size 16: deeper than its class list"},
		{"oldest of a thread with none live", []streamSet{block(recs(infoRec, events(1)), freeCode(refOldest)), after},
			"info damage@B0+3 alloc(0,0)@0x1000 end", "handle 0 is not live (reference code 1)"},
		damaged("handle never allocated", "handle 1 is not live", 3, recs(infoRec, events(1)), free(1)),
		{"rank of a block already freed", []streamSet{block(recs(infoRec, events(3)), a, freeCode(refRecent), freeCode(refRecent)), after},
			"info alloc(0,0)@0x1000 free(0,0)@0x1000 damage@B0+3 alloc(0,0)@0x1000 end", "event 3 of 3: handle 1 is not live"},
		damaged("handle out of range", "handle 1000 is not live", 4, recs(infoRec, events(1)), free(1000)),
		{"handle freed twice", []streamSet{block(recs(infoRec, events(3)), a, free(1), free(1)), after},
			"info alloc(0,0)@0x1000 free(0,0)@0x1000 damage@B0+3 alloc(0,0)@0x1000 end", "event 3 of 3: handle 1 is not live"},
		{"handle of another process", []streamSet{block(recs(infoRec, rec(KindContext, 1, 1), events(1), rec(KindContext, 2, 1), events(1)), a, free(1)), after},
			"info alloc(1,1)@0x1000 damage@B0+3 alloc(0,0)@0x1000 end", "handle 1 is not live"},
		{"events left over", []streamSet{block(recs(infoRec, events(1)), a, part{streamStack: {7}, streamRawAddr: {1, 2}}), after},
			"info alloc(0,0)@0x1000 damage@B0+3 alloc(0,0)@0x1000 end", "3 bytes of the event streams belong to no events record"},
		// The Reader decodes values ahead: those left over, tails and all,
		// are counted all the same.
		{"values with tails left over", []streamSet{block(recs(infoRec, events(1)), alloc(200, step(0x1000)), col(streamSize, 300, 5), col(streamStack, 200)), after},
			"info alloc(0,0)@0x1000 damage@B0+5 alloc(0,0)@0x1000 end", "5 bytes of the event streams belong to no events record"},
		{"damage in a later run", []streamSet{block(recs(infoRec, events(1), rec(KindTime, 3), events(2)), a, alloc(16, step(0)), free(7)), after},
			"info alloc(0,0)@0x1000 alloc(0,0)@0x1020 damage@B0+3 alloc(0,0)@0x1000 end", "events record at byte 11 of the records stream: event 2 of 2: handle 7 is not live"},
		{"damage after some events", []streamSet{block(recs(infoRec, events(2), rec(KindString, 1, "x")), a, free(7)), after},
			"info alloc(0,0)@0x1000 damage@B0+7 alloc(0,0)@0x1000 end", "events record at byte 7 of the records stream: event 2 of 2: handle 7 is not live"},
	})
}

// TestCraftedPredictors decodes addresses by every kind of code.
func TestCraftedPredictors(t *testing.T) {
	runCrafted(t, []craftCase{
		// Steps count from next, the end of the chunk of the previous
		// fresh block: 16 bytes take a chunk of 32, 100 one of 112.
		{"steps", []streamSet{block(recs(infoRec, events(6), endRec),
			alloc(16, step(0x5000)), alloc(16, step(0)), alloc(100, step(0)), alloc(16, step(-0xb0)), alloc(16, step(7)), alloc(16, step(-1)))},
			"info alloc(0,0)@0x5000 alloc(0,0)@0x5020 alloc(0,0)@0x5040 alloc(0,0)@0x5000 alloc(0,0)@0x5027 alloc(0,0)@0x5046 end", ""},
		{"aligned and odd steps", []streamSet{block(recs(infoRec, events(2), endRec),
			alloc(16, addrStep+2*4), alloc(16, addrStep+2*3))},
			"info alloc(0,0)@0x10 alloc(0,0)@0x2f end", ""},
		{"steps wrap around", []streamSet{block(recs(infoRec, events(2), endRec),
			alloc(16, step(-16)), alloc(16, step(0x20)))},
			"info alloc(0,0)@0xfffffffffffffff0 alloc(0,0)@0x30 end", ""},
		{"huge chunks wrap around", []streamSet{block(recs(infoRec, events(2), endRec),
			alloc(^uint64(7), step(0x1000)), alloc(16, step(0)))},
			"info alloc(0,0)@0x1000 alloc(0,0)@0x1020 end", ""},
		{"ranks among the latest allocations", []streamSet{block(recs(infoRec, events(5), endRec),
			alloc(16, step(0x1000)), alloc(16, step(0)), alloc(16, step(0)), freeCode(refRecent+1), freeCode(refRecent))},
			"info alloc(0,0)@0x1000 alloc(0,0)@0x1020 alloc(0,0)@0x1040 free(0,0)@0x1020 free(0,0)@0x1040 end", ""},
		{"pop and last freed", []streamSet{block(recs(infoRec, events(6), endRec),
			alloc(16, step(0x1000)), alloc(100, step(0xfe0)), free(1), free(2), alloc(16, depth(0)), alloc(20, addrLastFreed))},
			"info alloc(0,0)@0x1000 alloc(0,0)@0x2000 free(0,0)@0x1000 free(0,0)@0x2000 alloc(0,0)@0x1000 alloc(0,0)@0x2000 end", ""},
		{"next moves on only with steps and escapes", []streamSet{block(recs(infoRec, events(4), endRec),
			alloc(16, step(0x1000)), free(1), alloc(16, depth(0)), alloc(16, step(0)))},
			"info alloc(0,0)@0x1000 free(0,0)@0x1000 alloc(0,0)@0x1000 alloc(0,0)@0x1020 end", ""},
		{"class lists are LIFO", []streamSet{block(recs(infoRec, events(7), endRec),
			alloc(8, step(0x1000)), alloc(8, step(0)), free(1), free(2), alloc(1, depth(0)), alloc(24, depth(0)), free(2))},
			"info alloc(0,0)@0x1000 alloc(0,0)@0x1020 free(0,0)@0x1000 free(0,0)@0x1020 alloc(0,0)@0x1020 alloc(0,0)@0x1000 free(0,0)@0x1020 end", ""},
		{"depths skip what was taken out", []streamSet{block(recs(infoRec, events(9), endRec),
			alloc(8, step(0x1000)), alloc(8, step(0)), alloc(8, step(0)), free(1), free(2), free(3),
			alloc(8, depth(1)), alloc(8, depth(1)), alloc(8, depth(0)))},
			"info alloc(0,0)@0x1000 alloc(0,0)@0x1020 alloc(0,0)@0x1040 free(0,0)@0x1000 free(0,0)@0x1020 free(0,0)@0x1040 alloc(0,0)@0x1020 alloc(0,0)@0x1000 alloc(0,0)@0x1040 end", ""},
		// Thread 2 frees what thread 1 allocated, oldest first: the block
		// goes on thread 1's list, and thread 1 becomes thread 2's source.
		{"oldest of the source thread and its lists", []streamSet{block(recs(infoRec, rec(KindContext, 0, 1), events(3),
			rec(KindContext, 0, 2), events(4), endRec),
			alloc(16, step(0x1000)), alloc(16, step(0)), alloc(16, step(0)),
			free(1), freeCode(refOldest), allocSource(16, 1), alloc(16, step(0x3000)))},
			"info alloc(0,1)@0x1000 alloc(0,1)@0x1020 alloc(0,1)@0x1040 free(0,2)@0x1000 free(0,2)@0x1020 alloc(0,2)@0x1000 alloc(0,2)@0x3000 end", ""},
		{"each thread has its own next", []streamSet{block(recs(infoRec, rec(KindContext, 0, 1), events(1),
			rec(KindContext, 0, 2), events(1), rec(KindContext, 0, 1), events(1), endRec),
			alloc(16, step(0x1000)), alloc(16, step(0x8000)), alloc(16, step(0)))},
			"info alloc(0,1)@0x1000 alloc(0,2)@0x8000 alloc(0,1)@0x1020 end", ""},
		{"handles are reused LIFO", []streamSet{block(recs(infoRec, events(7), endRec),
			alloc(8, step(0x1000)), alloc(8, step(0)), alloc(8, step(0)), free(1), free(3), alloc(8, step(0xfe0)), free(3))},
			"info alloc(0,0)@0x1000 alloc(0,0)@0x1020 alloc(0,0)@0x1040 free(0,0)@0x1000 free(0,0)@0x1040 alloc(0,0)@0x2040 free(0,0)@0x2040 end", ""},
		{"escapes", []streamSet{block(recs(infoRec, events(5), endRec),
			free(0, zigzag(0x7000)), free(0, zigzag(-0x10)), alloc(16, addrEscape), alloc(16, addrLastFreed), alloc(16, step(0)),
			col(streamRawAddr, zigzag(0x30)))},
			"info free(0,0)@0x7000 free(0,0)@0x6ff0 alloc(0,0)@0x7020 alloc(0,0)@0x6ff0 alloc(0,0)@0x7040 end", ""},
		{"a free of unknown size is not stacked", []streamSet{block(recs(infoRec, events(2)),
			free(0, zigzag(0x7000)), alloc(16, depth(0))), block(recs(endRec))},
			"info free(0,0)@0x7000 damage@B0+4 end", "its class list is empty"},
		{"processes have their own state", []streamSet{block(recs(infoRec, rec(KindContext, 1, 1), events(1), rec(KindContext, 2, 1),
			events(2), rec(KindContext, 1, 2), events(2), endRec),
			alloc(16, step(0x1000)), alloc(16, step(0x2000)), free(1), free(1), allocSource(16, 0))},
			"info alloc(1,1)@0x1000 alloc(2,1)@0x2000 free(2,1)@0x2000 free(1,2)@0x1000 alloc(1,2)@0x1000 end", ""},
		{"the state starts afresh in every block", []streamSet{block(recs(infoRec, events(1)), alloc(16, step(0x1000))),
			block(recs(events(1)), free(1)), block(recs(endRec))},
			"info alloc(0,0)@0x1000 damage@B1+3 end", "handle 1 is not live"},
	})
}

// TestCraftedStreamTables checks the checks of stream tables: a table
// that is wrong under a valid CRC loses just its block.
func TestCraftedStreamTables(t *testing.T) {
	frame := func(data []byte, single bool) []byte {
		enc, err := zstd.NewWriter(nil, zstd.WithSingleSegment(single))
		if err != nil {
			t.Fatal(err)
		}
		return enc.EncodeAll(data, nil)
	}
	hundred := bytes.Repeat(endRec, 34)[:100]
	small := frame(hundred, true)
	noSize := frame(bytes.Repeat([]byte{byte(KindEnd), 0, 0}, 30), false)
	for _, tc := range []struct {
		name    string
		raw     uint32
		payload []byte
		reason  string
	}{
		{"too many streams", 0, []byte{15}, "stream table holds 15 streams, more than 14"},
		{"stored longer than raw", 3, []byte{1, 3, 4, 0, 1, 2, 3, 4}, "stored length 4 exceeds raw length 3"},
		{"raw stream shorter than raw", 3, []byte{1, 3, 2, 0, 1, 2}, "raw stream with stored length 2 and raw length 3"},
		{"unknown encoding", 2, []byte{1, 2, 2, 2, 1, 2}, "records stream: unknown encoding 2"},
		{"stored past the payload", 5, []byte{1, 5, 5, 0, 1, 2}, "stored length 5 runs past the end"},
		{"bytes after the last stream", 1, []byte{1, 1, 1, 0, 0x1f, 0}, "1 bytes after the last stream"},
		{"raw length too small", 4, []byte{1, 3, 3, 0, 0x1f, 0, 0}, "streams hold 3 bytes, block header says 4"},
		{"raw length too big", 2, []byte{1, 3, 3, 0, 0x1f, 0, 0}, "streams up to the records stream hold more than the 2 bytes"},
		{"table cut short", 3, []byte{2, 3, 3, 0, 0x1f, 0, 0, 1}, "stream table: ops stream: runs past the end"},
		{"frame content size wrong", 101, append([]byte{1, 101, byte(len(small)), 1}, small...), "zstd frame holds 100 bytes, stream table says 101"},
		{"frame without content size", 90, append([]byte{1, 90, byte(len(noSize)), 1}, noSize...), "zstd frame does not give its content size"},
		{"zstd stream of nothing", 0, []byte{1, 0, 0, 1}, "undecodable zstd frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(small) >= 100 || len(noSize) >= 90 {
				t.Fatal("test frames did not compress")
			}
			first := craftFile(block(recs(infoRec)))
			bad := craftPayload(tc.raw, tc.payload)
			data := append(append(first, bad...), craftFile(block(recs(endRec)))[fileHeaderSize:]...)
			got, reasons := outcome(t, data)
			if want := fmt.Sprintf("info damage@%d+%d end", len(first), len(bad)); got != want {
				t.Errorf("read %q, want %q (damage: %q)", got, want, reasons)
			}
			if len(reasons) == 0 || !strings.Contains(reasons[0], tc.reason) {
				t.Errorf("damage %q, want it to say %q", reasons, tc.reason)
			}
		})
	}
}

// TestCraftedHeaders checks block headers that cannot be trusted: the
// reader resynchronizes at the next block.
func TestCraftedHeaders(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(b []byte)
		reason string
	}{
		{"layout 0", func(b []byte) { b[4] = 0 }, "unknown layout 0"},
		{"layout 2", func(b []byte) { b[4] = 2 }, "unknown layout 2"},
		{"stored beyond raw and table", func(b []byte) {
			binary.LittleEndian.PutUint32(b[12:], binary.LittleEndian.Uint32(b[8:])-maxStreamTable-1)
		}, "stored length"},
		{"raw over the limit", func(b []byte) { binary.LittleEndian.PutUint32(b[12:], maxBlockRaw+1) }, "exceeds the limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := craftFile(block(recs(infoRec)))
			bad := craftFile(block(recs(rec(KindString, 1, strings.Repeat("x", 600)))))[fileHeaderSize:]
			tc.change(bad)
			data := append(append(first, bad...), craftFile(block(recs(endRec)))[fileHeaderSize:]...)
			got, reasons := outcome(t, data)
			if want := fmt.Sprintf("info damage@%d+%d end", len(first), len(bad)); got != want {
				t.Errorf("read %q, want %q (damage: %q)", got, want, reasons)
			}
			if len(reasons) == 0 || !strings.Contains(reasons[0], tc.reason) {
				t.Errorf("damage %q, want it to say %q", reasons, tc.reason)
			}
		})
	}
}

func itoa(n int) string { return fmt.Sprint(n) }

// TestUndecodableZstd checks a block whose CRC holds but whose zstd frame
// does not decode: just that block is skipped.
func TestUndecodableZstd(t *testing.T) {
	good := craftFile(block(recs(infoRec)))
	bad, _ := appendBlock(nil, &streamSet{bytes.Repeat(rec(KindString, 1, "abc"), 100)}, true, nil)
	// The frame follows the count (1 byte) and the stream's header: raw
	// length 600 (2 bytes), stored length (1 byte), encoding.
	frameAt := blockHeaderSize + 1 + 2 + 1 + 1
	if bad[frameAt-1] != encodingZstd || bad[frameAt-2] >= 0x80 {
		t.Fatal("test block did not compress")
	}
	// Spoil the frame after its header, then make the CRC fit again.
	for i := frameAt + 8; i < len(bad); i++ {
		bad[i] ^= 0x55
	}
	binary.LittleEndian.PutUint32(bad[16:], crc32Of(bad[blockHeaderSize:]))
	data := append(append(good, bad...), craftFile(block(recs(endRec)))[fileHeaderSize:]...)
	want := fmt.Sprintf("info damage@%d+%d end", len(good), len(bad))
	if got, _ := outcome(t, data); got != want {
		t.Errorf("read %q, want %q", got, want)
	}
}

// TestCraftedLeakScan checks the fields of LeakScan and LeakBlocks
// records, the example of docs/format.md, and that a block of a class
// that is not a lost one, or out of order, is damage.
func TestCraftedLeakScan(t *testing.T) {
	scan := skippable(KindLeakScan, 1, 9000, 52000, "", 40, 1, 120, 3, 0, 0, 16, 1)
	blocks := skippable(KindLeakBlocks, 1, 3, 0x1000, 1, 0x30, 2, int64(-0x30), 0x30, 3)
	if got, want := fmt.Sprintf("% x", blocks), "44 0a 01 03 80 20 01 30 02 5f 30 03"; got != want {
		t.Errorf("the documented LeakBlocks record is %s, want %s", got, want)
	}
	data := craftFile(block(recs(infoRec, scan, blocks, endRec)))
	var gotScan []LeakScan
	var gotBlocks []LeakBlock
	for _, rec := range readRecords(t, data) {
		switch rec.Kind {
		case KindLeakScan:
			gotScan = append(gotScan, *rec.LeakScan)
		case KindLeakBlocks:
			gotBlocks = append(gotBlocks, rec.LeakBlocks.Blocks...)
		}
	}
	wantScan := []LeakScan{{Process: 1, Time: 9000, Duration: 52000, DefinitelyLostBytes: 40, DefinitelyLostBlocks: 1,
		IndirectlyLostBytes: 120, IndirectlyLostBlocks: 3, StillReachableBytes: 16, StillReachableBlocks: 1}}
	wantBlocks := []LeakBlock{{0x1000, DefinitelyLost, 0}, {0x1030, IndirectlyLost, 0x1000}, {0x1060, PossiblyLost, 0}}
	if !slices.Equal(gotScan, wantScan) || !slices.Equal(gotBlocks, wantBlocks) {
		t.Errorf("read %+v %+v, want %+v %+v", gotScan, gotBlocks, wantScan, wantBlocks)
	}
	a := alloc(16, step(0x1000))
	for _, c := range []struct {
		name   string
		record []byte
		reason string
	}{
		{"class 0", skippable(KindLeakBlocks, 1, 1, 0x1000, 0), "has class 0, not a lost one"},
		{"out of order", skippable(KindLeakBlocks, 1, 2, 0x1000, 1, 0, 1), "is not after"},
	} {
		runCrafted(t, []craftCase{{"leak blocks " + c.name, []streamSet{block(recs(infoRec, c.record)), block(recs(events(1), endRec), a)},
			"info damage@B0+" + itoa(len(c.record)) + " alloc(0,0)@0x1000 end", c.reason}})
	}
}

// TestCraftedLeakOrigins checks the fields of a LeakOrigins record, the
// example of docs/format.md, an empty one, and that blocks out of order
// are damage.
func TestCraftedLeakOrigins(t *testing.T) {
	origins := skippable(KindLeakOrigins, 1, 2, 0x1000, int64(0x1000), 5000, 1, 7, 0x30, int64(-0x1030), 6000, 2, 9)
	if got, want := fmt.Sprintf("% x", origins), "45 11 01 02 80 20 80 40 88 27 01 07 30 df 40 f0 2e 02 09"; got != want {
		t.Errorf("the documented LeakOrigins record is %s, want %s", got, want)
	}
	empty := skippable(KindLeakOrigins, 1, 0)
	data := craftFile(block(recs(infoRec, origins, empty, endRec)))
	var got []LeakOrigins
	for _, rec := range readRecords(t, data) {
		if rec.Kind == KindLeakOrigins {
			got = append(got, *rec.LeakOrigins)
		}
	}
	want := []LeakOrigins{{Process: 1, Origins: []LeakOrigin{{Addr: 0x1000, Parent: 0x2000, Time: 5000, Thread: 1, Stack: 7},
		{Addr: 0x1030, Parent: 0, Time: 6000, Thread: 2, Stack: 9}}}, {Process: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read %+v, want %+v", got, want)
	}
	bad := skippable(KindLeakOrigins, 1, 2, 0x1000, int64(0), 1, 1, 1, 0, int64(0), 1, 1, 1)
	a := alloc(16, step(0x1000))
	runCrafted(t, []craftCase{{"leak origins out of order", []streamSet{block(recs(infoRec, bad)), block(recs(events(1), endRec), a)},
		"info damage@B0+" + itoa(len(bad)) + " alloc(0,0)@0x1000 end", "is not after"}})
}

// TestWarning checks the fields of a Warning record, the example of
// docs/format.md, and that the Writer writes what the Reader reads.
func TestWarning(t *testing.T) {
	crafted := skippable(KindWarning, 1, "no malloc")
	if got, want := fmt.Sprintf("% x", crafted), "46 0b 01 09 6e 6f 20 6d 61 6c 6c 6f 63"; got != want {
		t.Errorf("the documented Warning record is %s, want %s", got, want)
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Info{TimeUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	written := Warning{Process: 1, Message: "the program defines malloc itself"}
	if err := w.ProcessStart(Process{ID: 1, PID: 7, Exe: "/bin/x"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Warning(written); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var got []Warning
	for _, data := range [][]byte{craftFile(block(recs(infoRec, crafted, endRec))), buf.Bytes()} {
		for _, rec := range readRecords(t, data) {
			if rec.Kind == KindWarning {
				got = append(got, *rec.Warning)
			}
		}
	}
	want := []Warning{{Process: 1, Message: "no malloc"}, written}
	if !slices.Equal(got, want) {
		t.Errorf("read %+v, want %+v", got, want)
	}
}
