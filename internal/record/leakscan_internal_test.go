package record

import (
	"slices"
	"testing"
)

// TestParseScan reads a SCAN record with two stopped threads and two of
// the agent's mappings, and takes those out of a root range: before,
// between, after, overlapping its ends, and one that covers it all.
func TestParseScan(t *testing.T) {
	w := []uint64{0, 9, 100, 0x7000, 2, 0x9000, 0xa000, 2, 0x5000, 0x1000, 0x2000, 0x1000}
	sr := parseScan(w)
	if !slices.Equal(sr.sps, []uint64{0x7000, 0x9000, 0xa000}) || !slices.Equal(sr.own, [][2]uint64{{0x2000, 0x3000}, {0x5000, 0x6000}}) {
		t.Fatalf("parseScan: stack pointers %x, own mappings %x", sr.sps, sr.own)
	}
	for _, c := range []struct {
		lo, hi uint64
		want   [][2]uint64
	}{
		{0x1000, 0x8000, [][2]uint64{{0x1000, 0x2000}, {0x3000, 0x5000}, {0x6000, 0x8000}}},
		{0x2800, 0x5800, [][2]uint64{{0x3000, 0x5000}}},
		{0x2000, 0x3000, nil},
		{0x7000, 0x8000, [][2]uint64{{0x7000, 0x8000}}},
	} {
		if got := appendOutside(nil, c.lo, c.hi, sr.own); !slices.Equal(got, c.want) {
			t.Errorf("[%x, %x) outside the agent's mappings: %x, want %x", c.lo, c.hi, got, c.want)
		}
	}
	if sr := parseScan([]uint64{0, 9, 100, 0x7000, 5, 1}); len(sr.sps) != 1 || sr.own != nil {
		t.Errorf("a damaged record: stack pointers %x, own mappings %x", sr.sps, sr.own)
	}
}
