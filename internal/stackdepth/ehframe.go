package stackdepth

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/memtrail/memtrail/internal/symbolize"
)

// The call-frame information of .eh_frame (the format of the LSB, close to
// DWARF's .debug_frame): a sequence of records, each a CIE (what the
// functions of a compiler unit share: alignment factors, the return
// address register, how pointers are encoded, initial instructions) or an
// FDE (one range of code: its start and length, and the instructions that
// say, row by row as the code advances, how to find the canonical frame
// address (CFA, the stack pointer before the call) and the saved
// registers). Only the CFA rule matters here: CFA = register + offset
// tells how much stack the function holds at each instruction when the
// register is the stack pointer.

// DWARF register numbers of x86-64.
const (
	dwarfRBP = 6
	dwarfRSP = 7
)

// cfaRule is how the CFA is computed from some address on: register plus
// offset, or a DWARF expression (which is not evaluated).
type cfaRule struct {
	reg    uint64
	offset int64
	expr   bool
}

// cfaRow says that from addr on (to the next row or the end of the FDE)
// the CFA follows rule.
type cfaRow struct {
	addr uint64
	rule cfaRule
}

// fde is one frame description: the code range [begin, end) and its CFA
// rows, sorted by address, the first at begin.
type fde struct {
	begin, end uint64
	rows       []cfaRow
}

// rowAt returns the CFA rule in force at addr, which must be in the FDE's
// range.
func (f *fde) rowAt(addr uint64) cfaRule {
	i, _ := slices.BinarySearchFunc(f.rows, addr, func(r cfaRow, a uint64) int {
		switch {
		case r.addr < a:
			return -1
		case r.addr > a:
			return 1
		}
		return 0
	})
	if i < len(f.rows) && f.rows[i].addr == addr {
		return f.rows[i].rule
	}
	if i == 0 {
		return f.rows[0].rule
	}
	return f.rows[i-1].rule
}

// maxStackOffset returns the largest CFA offset of the FDE's rows whose
// CFA is the stack pointer plus an offset: the most stack the code holds,
// its return address included, where the CFI alone says so.
func (f *fde) maxStackOffset() int64 {
	var most int64
	for _, r := range f.rows {
		if !r.rule.expr && r.rule.reg == dwarfRSP {
			most = max(most, r.rule.offset)
		}
	}
	return most
}

// cie is what the FDEs of one CIE share.
type cie struct {
	codeAlign  uint64
	dataAlign  int64
	ptrEncoded byte // how the FDEs' addresses are encoded ('R')
	augData    bool // the FDEs carry augmentation data ('z')
	initial    []byte
}

// Pointer encodings (DW_EH_PE_*): the low nibble is the format, the high
// one how the value applies.
const (
	peAbsptr  = 0x00
	peULEB128 = 0x01
	peUdata2  = 0x02
	peUdata4  = 0x03
	peUdata8  = 0x04
	peSLEB128 = 0x09
	peSdata2  = 0x0a
	peSdata4  = 0x0b
	peSdata8  = 0x0c
	pePCRel   = 0x10
	peDataRel = 0x30
	peOmit    = 0xff
)

// ehReader reads the section's data; it remembers the first error.
type ehReader struct {
	data []byte
	pos  int
	base uint64 // the section's address, for pc-relative pointers
	err  error
}

var errTruncated = errors.New("truncated")

func (r *ehReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.pos = len(r.data)
}

func (r *ehReader) bytes(n int) []byte {
	if n < 0 || r.pos+n > len(r.data) {
		r.fail(errTruncated)
		return nil
	}
	b := r.data[r.pos : r.pos+n]
	r.pos += n
	return b
}

func (r *ehReader) u8() byte {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *ehReader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *ehReader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *ehReader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *ehReader) uleb() uint64 {
	v, n := symbolize.ULEB128(r.data[r.pos:])
	r.leb(n)
	return v
}

func (r *ehReader) sleb() int64 {
	v, n := symbolize.SLEB128(r.data[r.pos:])
	r.leb(n)
	return v
}

// leb moves past a LEB128 number of n bytes, 0 if the data ended in it.
func (r *ehReader) leb(n int) {
	if n == 0 {
		r.fail(errTruncated)
		return
	}
	r.pos += n
}

func (r *ehReader) cstring() string {
	for i := r.pos; i < len(r.data); i++ {
		if r.data[i] == 0 {
			s := string(r.data[r.pos:i])
			r.pos = i + 1
			return s
		}
	}
	r.fail(errTruncated)
	return ""
}

// pointer reads a pointer encoded with enc. It returns the value as the
// encoding applies it (pc-relative ones made absolute), or an error for
// encodings an executable's .eh_frame does not use.
func (r *ehReader) pointer(enc byte) uint64 {
	if enc == peOmit {
		return 0
	}
	at := r.base + uint64(r.pos)
	var v uint64
	switch enc & 0x0f {
	case peAbsptr, peUdata8, peSdata8:
		v = r.u64()
	case peULEB128:
		v = r.uleb()
	case peSLEB128:
		v = uint64(r.sleb())
	case peUdata2:
		v = uint64(r.u16())
	case peSdata2:
		v = uint64(int64(int16(r.u16())))
	case peUdata4:
		v = uint64(r.u32())
	case peSdata4:
		v = uint64(int64(int32(r.u32())))
	default:
		r.fail(fmt.Errorf("pointer encoding %#x", enc))
		return 0
	}
	switch enc & 0x70 {
	case 0:
	case pePCRel:
		v += at
	default:
		// text- and data-relative pointers need the bases of sections
		// x86-64 executables do not use for this.
		r.fail(fmt.Errorf("pointer encoding %#x", enc))
	}
	return v
}

// parseEHFrame reads the FDEs of an .eh_frame section of data loaded at
// addr, sorted by address. An FDE whose instructions cannot be run is left
// out (its function then has no CFI); a broken record structure is an
// error.
func parseEHFrame(data []byte, addr uint64) ([]fde, error) {
	r := &ehReader{data: data, base: addr}
	cies := map[int]*cie{}
	var fdes []fde
	for r.pos < len(data) {
		start := r.pos
		length := uint64(r.u32())
		if r.err != nil {
			return nil, fmt.Errorf("record at %#x: %w", start, r.err)
		}
		if length == 0 {
			break // the terminator
		}
		if length == 0xffffffff {
			length = r.u64()
		}
		if length > uint64(len(data)-r.pos) {
			return nil, fmt.Errorf("record at %#x: length %d goes past the section's end", start, length)
		}
		end := r.pos + int(length)
		idPos := r.pos
		id := r.u32()
		body := &ehReader{data: data[:end], pos: r.pos, base: addr}
		if id == 0 {
			c, err := parseCIE(body)
			if err != nil {
				return nil, fmt.Errorf("CIE at %#x: %w", start, err)
			}
			cies[start] = c
		} else {
			cieAt := idPos - int(id)
			c, ok := cies[cieAt]
			if !ok {
				if cieAt < 0 || cieAt >= len(data) {
					return nil, fmt.Errorf("FDE at %#x: its CIE at %#x is outside the section", start, cieAt)
				}
				var err error
				if c, err = parseCIEAt(data, addr, cieAt); err != nil {
					return nil, fmt.Errorf("FDE at %#x: %w", start, err)
				}
				cies[cieAt] = c
			}
			if f, err := parseFDE(body, c); err == nil && f.end > f.begin {
				fdes = append(fdes, f)
			}
		}
		r.pos = end
	}
	slices.SortFunc(fdes, func(a, b fde) int {
		switch {
		case a.begin < b.begin:
			return -1
		case a.begin > b.begin:
			return 1
		}
		return 0
	})
	return fdes, nil
}

// parseCIEAt reads the CIE that starts at offset at of the section.
func parseCIEAt(data []byte, addr uint64, at int) (*cie, error) {
	r := &ehReader{data: data, pos: at, base: addr}
	length := uint64(r.u32())
	if length == 0xffffffff {
		length = r.u64()
	}
	if r.err != nil || length > uint64(len(data)-r.pos) {
		return nil, fmt.Errorf("CIE at %#x: bad length", at)
	}
	end := r.pos + int(length)
	if r.u32() != 0 {
		return nil, fmt.Errorf("the record at %#x is not a CIE", at)
	}
	c, err := parseCIE(&ehReader{data: data[:end], pos: r.pos, base: addr})
	if err != nil {
		return nil, fmt.Errorf("CIE at %#x: %w", at, err)
	}
	return c, nil
}

// parseCIE reads a CIE's body, after its id.
func parseCIE(r *ehReader) (*cie, error) {
	c := &cie{ptrEncoded: peAbsptr}
	version := r.u8()
	if version != 1 && version != 3 {
		return nil, fmt.Errorf("version %d", version)
	}
	aug := r.cstring()
	if len(aug) >= 2 && aug[:2] == "eh" {
		r.u64() // the old GCC exception table pointer
		aug = aug[2:]
	}
	c.codeAlign = r.uleb()
	c.dataAlign = r.sleb()
	if version == 1 {
		r.u8()
	} else {
		r.uleb()
	}
	if len(aug) > 0 && aug[0] == 'z' {
		c.augData = true
		n := r.uleb()
		augEnd := r.pos + int(n)
		for _, ch := range aug[1:] {
			switch ch {
			case 'L':
				r.u8() // the LSDA's encoding, for the FDEs' augmentation data
			case 'P':
				r.pointer(r.u8() &^ 0x80) // the personality routine; indirect or not, its address is skipped
			case 'R':
				c.ptrEncoded = r.u8()
			case 'S', 'B', 'G':
			default:
				// Unknown letters after 'z' are allowed: the length
				// says where the data ends.
			}
		}
		if augEnd > len(r.data) {
			return nil, errTruncated
		}
		r.pos = augEnd
	} else if aug != "" {
		return nil, fmt.Errorf("augmentation %q", aug)
	}
	if r.err != nil {
		return nil, r.err
	}
	c.initial = r.data[r.pos:]
	return c, nil
}

// parseFDE reads an FDE's body, after its CIE pointer, and runs its CIE's
// initial instructions and its own into CFA rows.
func parseFDE(r *ehReader, c *cie) (fde, error) {
	begin := r.pointer(c.ptrEncoded)
	length := r.pointer(c.ptrEncoded & 0x0f) // the range is a plain size
	if c.augData {
		n := r.uleb()
		r.bytes(int(n))
	}
	if r.err != nil {
		return fde{}, r.err
	}
	f := fde{begin: begin, end: begin + length}
	rows, err := runCFA(c, begin, c.initial, r.data[r.pos:])
	if err != nil {
		return fde{}, err
	}
	f.rows = rows
	return f, nil
}

// DWARF call frame instructions (DW_CFA_*). The top two bits of the
// first three hold an operand.
const (
	cfaAdvanceLoc        = 0x40
	cfaOffset            = 0x80
	cfaRestore           = 0xc0
	cfaNop               = 0x00
	cfaSetLoc            = 0x01
	cfaAdvanceLoc1       = 0x02
	cfaAdvanceLoc2       = 0x03
	cfaAdvanceLoc4       = 0x04
	cfaOffsetExtended    = 0x05
	cfaRestoreExtended   = 0x06
	cfaUndefined         = 0x07
	cfaSameValue         = 0x08
	cfaRegister          = 0x09
	cfaRememberState     = 0x0a
	cfaRestoreState      = 0x0b
	cfaDefCFA            = 0x0c
	cfaDefCFARegister    = 0x0d
	cfaDefCFAOffset      = 0x0e
	cfaDefCFAExpression  = 0x0f
	cfaExpression        = 0x10
	cfaOffsetExtendedSF  = 0x11
	cfaDefCFASF          = 0x12
	cfaDefCFAOffsetSF    = 0x13
	cfaValOffset         = 0x14
	cfaValOffsetSF       = 0x15
	cfaValExpression     = 0x16
	cfaGNUWindowSave     = 0x2d
	cfaGNUArgsSize       = 0x2e
	cfaGNUNegOffsetExtnd = 0x2f
)

// runCFA runs the CIE's initial instructions, then the FDE's, from the
// FDE's start address, and returns the CFA rule of each row: a new row
// begins at each advance that changes the rule. Only the CFA is followed;
// register rules are read past.
func runCFA(c *cie, begin uint64, initial, program []byte) ([]cfaRow, error) {
	loc := begin
	var rule cfaRule
	var stack []cfaRule // remember_state / restore_state
	rows := []cfaRow{{addr: begin}}
	set := func() {
		last := &rows[len(rows)-1]
		if last.addr == loc {
			last.rule = rule
		} else if last.rule != rule {
			rows = append(rows, cfaRow{addr: loc, rule: rule})
		}
	}
	for _, instructions := range [][]byte{initial, program} {
		r := &ehReader{data: instructions}
		for r.pos < len(r.data) && r.err == nil {
			op := r.u8()
			switch op & 0xc0 {
			case cfaAdvanceLoc:
				loc += uint64(op&0x3f) * c.codeAlign
				continue
			case cfaOffset:
				r.uleb()
				continue
			case cfaRestore:
				continue
			}
			switch op {
			case cfaNop, cfaRestoreExtended, cfaUndefined, cfaSameValue, cfaGNUWindowSave:
				if op != cfaNop && op != cfaGNUWindowSave {
					r.uleb()
				}
			case cfaSetLoc:
				loc = r.pointer(c.ptrEncoded)
			case cfaAdvanceLoc1:
				loc += uint64(r.u8()) * c.codeAlign
			case cfaAdvanceLoc2:
				loc += uint64(r.u16()) * c.codeAlign
			case cfaAdvanceLoc4:
				loc += uint64(r.u32()) * c.codeAlign
			case cfaOffsetExtended, cfaRegister, cfaValOffset, cfaGNUNegOffsetExtnd:
				r.uleb()
				r.uleb()
			case cfaOffsetExtendedSF, cfaValOffsetSF:
				r.uleb()
				r.sleb()
			case cfaRememberState:
				stack = append(stack, rule)
			case cfaRestoreState:
				if len(stack) == 0 {
					return nil, errors.New("DW_CFA_restore_state without a remembered state")
				}
				rule, stack = stack[len(stack)-1], stack[:len(stack)-1]
			case cfaDefCFA:
				rule = cfaRule{reg: r.uleb(), offset: int64(r.uleb())}
			case cfaDefCFASF:
				rule = cfaRule{reg: r.uleb(), offset: r.sleb() * c.dataAlign}
			case cfaDefCFARegister:
				rule.reg, rule.expr = r.uleb(), false
			case cfaDefCFAOffset:
				rule.offset, rule.expr = int64(r.uleb()), false
			case cfaDefCFAOffsetSF:
				rule.offset, rule.expr = r.sleb()*c.dataAlign, false
			case cfaDefCFAExpression:
				r.bytes(int(r.uleb()))
				rule = cfaRule{expr: true}
			case cfaExpression, cfaValExpression:
				r.uleb()
				r.bytes(int(r.uleb()))
			case cfaGNUArgsSize:
				r.uleb()
			default:
				return nil, fmt.Errorf("unknown call frame instruction %#x", op)
			}
			set()
		}
		if r.err != nil {
			return nil, r.err
		}
		// The CIE's rule is the first row's.
		set()
	}
	return rows, nil
}
