package symbolize

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
)

func TestSpanIndex(t *testing.T) {
	x := newSpanIndex([]span{
		{lo: 100, hi: 200, id: 0}, // a function
		{lo: 120, hi: 150, id: 1}, // inlined in it
		{lo: 130, hi: 140, id: 2}, // inlined in that
		{lo: 300, hi: 400, id: 3},
		{lo: 350, hi: 350, id: 4}, // empty: dropped
		{lo: 390, hi: 500, id: 5}, // overlaps 3
		{lo: 100, hi: 110, id: 6}, // same start as 0, inside it
	})
	for _, tc := range []struct {
		addr uint64
		want int32
	}{
		{99, -1}, {100, 6}, {109, 6}, {110, 0}, {119, 0}, {120, 1}, {130, 2}, {139, 2}, {140, 1},
		{150, 0}, {199, 0}, {200, -1}, {350, 3}, {389, 3}, {390, 5}, {450, 5}, {500, -1},
	} {
		if got := x.find(tc.addr); got != tc.want {
			t.Errorf("find(%d) = %d, want %d", tc.addr, got, tc.want)
		}
	}
	empty := newSpanIndex(nil)
	if got := empty.find(0); got != -1 {
		t.Errorf("empty index: find(0) = %d, want -1", got)
	}
}

func TestParseAranges(t *testing.T) {
	le := binary.LittleEndian
	var b bytes.Buffer
	put := func(v any) { binary.Write(&b, le, v) }

	// A 32-bit set for the unit at 0x10: header 12 bytes, padded to 16.
	put(uint32(4 + 2 + 1 + 1 + 4 + 3*16))
	put(uint16(2))
	put(uint32(0x10))
	put(uint8(8))
	put(uint8(0))
	put(uint32(0)) // padding
	put(uint64(0x1000))
	put(uint64(0x20))
	put(uint64(0x3000))
	put(uint64(0x8))
	put(uint64(0))
	put(uint64(0))
	// A 64-bit set for the unit at 0x200: header 24 bytes, padded to 32.
	put(uint32(0xffffffff))
	put(uint64(2 + 8 + 1 + 1 + 8 + 2*16))
	put(uint16(2))
	put(uint64(0x200))
	put(uint8(8))
	put(uint8(0))
	put(uint64(0)) // padding
	put(uint64(0x5000))
	put(uint64(0x10))
	put(uint64(0))
	put(uint64(0))

	got, err := parseAranges(b.Bytes(), le)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64][][2]uint64{
		0x10:  {{0x1000, 0x1020}, {0x3000, 0x3008}},
		0x200: {{0x5000, 0x5010}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseAranges = %v, want %v", got, want)
	}
	if _, err := parseAranges(b.Bytes()[:30], le); err == nil {
		t.Errorf("truncated section: no error")
	}
}

func TestLEB128(t *testing.T) {
	for _, tc := range []struct {
		data []byte
		u    uint64
		s    int64
	}{
		{[]byte{0x02}, 2, 2},
		{[]byte{0x7f}, 127, -1},
		{[]byte{0x80, 0x01}, 128, 128},
		{[]byte{0xe5, 0x8e, 0x26}, 624485, 624485},
		{[]byte{0xc0, 0xbb, 0x78}, 1973696, -123456},
	} {
		if got := (&scanBuf{data: tc.data}).uleb(); got != tc.u {
			t.Errorf("uleb(% x) = %d, want %d", tc.data, got, tc.u)
		}
		if got := (&scanBuf{data: tc.data}).sleb(); got != tc.s {
			t.Errorf("sleb(% x) = %d, want %d", tc.data, got, tc.s)
		}
	}
	b := &scanBuf{data: []byte{0x80}}
	if b.uleb(); b.err == nil {
		t.Errorf("truncated uleb: no error")
	}
}

// FuzzDWARFScanner feeds arbitrary .debug_info, .debug_abbrev and
// .debug_aranges bytes to the parsers that do not go through debug/dwarf:
// they must fail, not panic or loop.
func FuzzDWARFScanner(f *testing.F) {
	// A DWARF 4 unit: a compile unit with one child subprogram.
	abbrev := []byte{
		1, 0x11, 1, 0x03, 0x08, 0, 0, // compile_unit, children, name:string
		2, 0x2e, 0, 0x11, 0x01, 0x12, 0x06, 0x01, 0x13, 0, 0, // subprogram: low_pc addr, high_pc data4, sibling ref4
		0,
	}
	info := []byte{0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 8,
		1, 'a', 0,
		2, 0, 0x10, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0x24, 0, 0, 0,
		0}
	binary.LittleEndian.PutUint32(info, uint32(len(info)-4))
	f.Add(info, abbrev, []byte{})
	f.Fuzz(func(t *testing.T, info, abbrev, aranges []byte) {
		parseAranges(aranges, binary.LittleEndian)
		headers, _ := parseUnitHeaders(info, binary.LittleEndian)
		for i := range headers {
			h := &headers[i]
			table, err := parseAbbrevs(abbrev, h.abbrevOff)
			if err != nil {
				continue
			}
			b := &scanBuf{data: info[:h.end], pos: h.dieOffset, order: binary.LittleEndian}
			b.skipChildren(table, h)
		}
		sections := lineSections{line: info, lineStr: abbrev, str: aranges, order: binary.LittleEndian}
		sections.dwarf5FileNames(0)
	})
}
