package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"testing"
)

// These tests build blocks byte by byte, to get records no sound Writer
// writes: unknown kinds, and damage under a valid CRC.

// craftFile returns a trace file with a block for each payload.
func craftFile(payloads ...[]byte) []byte {
	data := []byte(Magic + "\x01\x00\x00\x00\x00\x00\x00\x00")
	for _, p := range payloads {
		data = appendBlock(data, p, false)
	}
	return data
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

func crc32Of(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func join(recs ...[]byte) []byte { return bytes.Join(recs, nil) }

var (
	infoRec  = rec(KindInfo, int64(0), 1, "", "", 0, 0)
	endRec   = rec(KindEnd, 0, 0)
	allocRec = rec(KindAlloc, 5, byte(APIMalloc), int64(0x1000), 16, int64(1))
)

// outcome reads a crafted file and returns its records in a short text
// form, with damage as "damage@offset+skipped".
func outcome(t *testing.T, data []byte) string {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for range 1000 {
		rec, err := r.Next()
		var d *DamageError
		switch {
		case errors.As(err, &d):
			out = append(out, fmt.Sprintf("damage@%d+%d", d.Offset, d.BytesSkipped))
			continue
		case err == io.EOF:
			return strings.Join(out, " ")
		case err != nil:
			return strings.Join(append(out, err.Error()), " ")
		}
		s := rec.Kind.String()
		if rec.Kind.IsEvent() {
			s += fmt.Sprintf("(%d,%d)", rec.Event.Process, rec.Event.Thread)
		}
		out = append(out, s)
	}
	t.Fatal("reader does not come to an end")
	return ""
}

func TestCrafted(t *testing.T) {
	first := 16 + blockHeaderSize // offset of the second block when the first is empty
	for _, tc := range []struct {
		name   string
		blocks [][]byte
		want   string
	}{
		{"skippable kind", [][]byte{join(infoRec, rec(0x40, 3, []byte{1, 2, 3}), allocRec, rec(0x7f, 0), endRec)},
			"info alloc(0,0) end"},
		{"skippable kind too long", [][]byte{join(infoRec, rec(0x41, 100, []byte{1})), join(allocRec, endRec)},
			"info damage@16+3 alloc(0,0) end"},
		{"unknown fixed kind", [][]byte{join(infoRec, rec(0x20, 1), allocRec), join(allocRec, endRec)},
			"info damage@16+" + itoa(len(rec(0x20, 1))+len(allocRec)) + " alloc(0,0) end"},
		{"kind above skippable range", [][]byte{join(infoRec, []byte{0x80}), join(endRec)},
			"info damage@16+1 end"},
		{"kind zero", [][]byte{{}, join([]byte{0}, allocRec), join(endRec)},
			"damage@" + itoa(first) + "+" + itoa(1+len(allocRec)) + " end"},
		{"record past end of block", [][]byte{join(infoRec, allocRec[:4]), join(allocRec, endRec)},
			"info damage@16+4 alloc(0,0) end"},
		{"string longer than block", [][]byte{join(infoRec, rec(KindString, 1, 1<<40)), join(endRec)},
			"info damage@16+8 end"},
		{"huge frame count", [][]byte{join(infoRec, rec(KindSymbol, 1, 2, uint64(1)<<62, 1, 2, 3)), join(endRec)},
			"info damage@16+" + itoa(len(rec(KindSymbol, 1, 2, uint64(1)<<62, 1, 2, 3))) + " end"},
		{"huge segment count", [][]byte{join(infoRec, rec(KindModule, 1, 1, 1, 0, 0, 1000, 1, 2, 3, 4)), join(endRec)},
			"info damage@16+" + itoa(len(rec(KindModule, 1, 1, 1, 0, 0, 1000, 1, 2, 3, 4))) + " end"},
		{"huge args count", [][]byte{join(infoRec, rec(KindProcessStart, 1, 2, 3, 0, 0, "exe", 5, "a")), join(endRec)},
			"info damage@16+" + itoa(len(rec(KindProcessStart, 1, 2, 3, 0, 0, "exe", 5, "a"))) + " end"},
		{"varint over 64 bits", [][]byte{join(infoRec, rec(KindString, bytes.Repeat([]byte{0xff}, 10), byte(1))), join(endRec)},
			"info damage@16+12 end"},
		{"time unit zero", [][]byte{rec(KindInfo, int64(0), 0, "", "", 0, 0), join(endRec)},
			"damage@16+" + itoa(len(infoRec)) + " end"},
		{"context", [][]byte{join(infoRec, allocRec, rec(KindContext, 3, 4), allocRec), join(allocRec, endRec)},
			"info alloc(0,0) alloc(3,4) alloc(0,0) end"},
		{"records after end", [][]byte{join(infoRec, endRec, allocRec), join(allocRec)},
			"info end"},
		{"no end", [][]byte{join(infoRec, allocRec)},
			"info alloc(0,0) " + ErrIncomplete.Error()},
		{"empty blocks", [][]byte{{}, infoRec, {}, endRec},
			"info end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outcome(t, craftFile(tc.blocks...)); got != tc.want {
				t.Errorf("read %q, want %q", got, tc.want)
			}
		})
	}
}

func itoa(n int) string { return fmt.Sprint(n) }

// TestUndecodableZstd checks a block whose CRC holds but whose zstd frame
// does not decode: just that block is skipped.
func TestUndecodableZstd(t *testing.T) {
	good := craftFile(infoRec)
	bad := appendBlock(nil, bytes.Repeat(allocRec, 100), true)
	if bad[4] != encodingZstd {
		t.Fatal("test block did not compress")
	}
	// Spoil the frame after its header, then make the CRC fit again.
	for i := blockHeaderSize + 8; i < len(bad); i++ {
		bad[i] ^= 0x55
	}
	binary.LittleEndian.PutUint32(bad[16:], crc32Of(bad[blockHeaderSize:]))
	data := append(append(good, bad...), appendBlock(nil, endRec, false)...)
	want := fmt.Sprintf("info damage@%d+%d end", len(good), len(bad))
	if got := outcome(t, data); got != want {
		t.Errorf("read %q, want %q", got, want)
	}
}
