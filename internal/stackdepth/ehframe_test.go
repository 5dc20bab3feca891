package stackdepth

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

// ehFrame builds an .eh_frame section at addr: one CIE as gcc writes it
// ("zR", code alignment 1, data alignment -8, return address in r16,
// pc-relative signed 4-byte pointers, CFA = rsp+8) and one FDE for
// [begin, begin+size) with the instructions given, then the terminator.
func ehFrame(addr, begin, size uint64, instructions ...byte) []byte {
	var sec []byte
	record := func(body []byte) {
		sec = binary.LittleEndian.AppendUint32(sec, uint32(len(body)))
		sec = append(sec, body...)
	}
	cie := []byte{0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b, cfaDefCFA, dwarfRSP, 8, cfaOffset | 16, 1, 0, 0}
	record(cie)
	fdeAt := len(sec)
	body := binary.LittleEndian.AppendUint32(nil, uint32(fdeAt+4)) // back to the CIE at 0
	pcField := addr + uint64(fdeAt+4+len(body))
	body = binary.LittleEndian.AppendUint32(body, uint32(int32(int64(begin)-int64(pcField))))
	body = binary.LittleEndian.AppendUint32(body, uint32(size))
	body = append(body, 0) // no augmentation data
	body = append(body, instructions...)
	record(body)
	return binary.LittleEndian.AppendUint32(sec, 0)
}

func TestParseEHFrame(t *testing.T) {
	// push rbp; mov rbp, rsp; ... a remembered state around an early
	// return; then a stack-pointer CFA of 48 reached with an advance_loc2.
	data := ehFrame(0x2000, 0x1000, 0x400,
		cfaAdvanceLoc|1, cfaDefCFAOffset, 16, cfaOffset|dwarfRBP, 2,
		cfaAdvanceLoc|3, cfaDefCFARegister, dwarfRBP,
		cfaAdvanceLoc|0x20, cfaRememberState, cfaDefCFA, dwarfRSP, 8,
		cfaAdvanceLoc|1, cfaRestoreState,
		cfaAdvanceLoc2, 0x00, 0x01, cfaDefCFA, dwarfRSP, 48,
		cfaAdvanceLoc1, 0x10, cfaDefCFAOffsetSF, 0x7f, // -1 * -8 = 8
		cfaNop, cfaNop)
	fdes, err := parseEHFrame(data, 0x2000)
	if err != nil {
		t.Fatal(err)
	}
	if len(fdes) != 1 || fdes[0].begin != 0x1000 || fdes[0].end != 0x1400 {
		t.Fatalf("FDEs %+v, want one for [0x1000, 0x1400)", fdes)
	}
	want := []cfaRow{
		{0x1000, cfaRule{reg: dwarfRSP, offset: 8}},
		{0x1001, cfaRule{reg: dwarfRSP, offset: 16}},
		{0x1004, cfaRule{reg: dwarfRBP, offset: 16}},
		{0x1024, cfaRule{reg: dwarfRSP, offset: 8}},
		{0x1025, cfaRule{reg: dwarfRBP, offset: 16}},
		{0x1125, cfaRule{reg: dwarfRSP, offset: 48}},
		{0x1135, cfaRule{reg: dwarfRSP, offset: 8}},
	}
	if !slices.Equal(fdes[0].rows, want) {
		t.Errorf("rows\n%+v\nwant\n%+v", fdes[0].rows, want)
	}
	if got := fdes[0].maxStackOffset(); got != 48 {
		t.Errorf("largest stack-pointer CFA offset %d, want 48", got)
	}
	for addr, rule := range map[uint64]cfaRule{0x1000: want[0].rule, 0x1003: want[1].rule, 0x1024: want[3].rule, 0x1130: want[5].rule, 0x13ff: want[6].rule} {
		if got := fdes[0].rowAt(addr); got != rule {
			t.Errorf("rule at %#x: %+v, want %+v", addr, got, rule)
		}
	}
}

func TestParseEHFrameDamage(t *testing.T) {
	good := ehFrame(0x2000, 0x1000, 0x10, cfaAdvanceLoc|1, cfaDefCFAOffset, 16)
	// A record longer than the section is an error.
	if _, err := parseEHFrame(good[:len(good)-10], 0x2000); err == nil || !strings.Contains(err.Error(), "past the section's end") {
		t.Errorf("truncated section: error %v", err)
	}
	// An FDE with an instruction unknown to DWARF is left out, not fatal.
	bad := ehFrame(0x2000, 0x1000, 0x10, cfaAdvanceLoc|1, 0x3f)
	if fdes, err := parseEHFrame(bad, 0x2000); err != nil || len(fdes) != 0 {
		t.Errorf("unknown instruction: %d FDEs, error %v; want none, no error", len(fdes), err)
	}
	// restore_state with nothing remembered is the FDE's error too.
	if fdes, err := parseEHFrame(ehFrame(0x2000, 0x1000, 0x10, cfaRestoreState), 0x2000); err != nil || len(fdes) != 0 {
		t.Errorf("restore_state alone: %d FDEs, error %v", len(fdes), err)
	}
}

func TestLEB128(t *testing.T) {
	r := &ehReader{data: []byte{0xe5, 0x8e, 0x26, 0x7f, 0x80, 0x7f, 0x02}}
	if v := r.uleb(); v != 624485 {
		t.Errorf("uleb %d, want 624485", v)
	}
	for _, want := range []int64{-1, -128, 2} {
		if v := r.sleb(); v != want {
			t.Errorf("sleb %d, want %d", v, want)
		}
	}
	if r.err != nil {
		t.Error(r.err)
	}
	r.uleb()
	if r.err == nil {
		t.Error("no error reading past the end")
	}
}
