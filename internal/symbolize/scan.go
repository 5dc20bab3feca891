package symbolize

import (
	"debug/dwarf"
	"encoding/binary"
	"errors"
	"fmt"
)

// A DIE scanner walks the DIE tree of a unit in .debug_info by reading
// only each DIE's abbreviation and skipping its attribute values by their
// form's size. debug/dwarf's Reader decodes every attribute of every DIE
// into a new Entry, and most DIEs are types and variables that say nothing
// about code: the scanner finds the few that do (subprograms and inlined
// subroutines with addresses), which debug/dwarf then decodes.

// A unitHeader is what the scanner needs of a unit's header.
type unitHeader struct {
	offset     uint64 // of the header in .debug_info
	dieOffset  uint64 // of the unit's first DIE
	end        uint64 // offset of the next unit
	version    int
	addrSize   int
	offsetSize int // 4, or 8 for 64-bit DWARF
	abbrevOff  uint64
}

// parseUnitHeaders reads the headers of all units in .debug_info.
func parseUnitHeaders(info []byte, order binary.ByteOrder) ([]unitHeader, error) {
	var units []unitHeader
	for off := uint64(0); off < uint64(len(info)); {
		b := &scanBuf{data: info, pos: off, order: order}
		h := unitHeader{offset: off, offsetSize: 4}
		length := uint64(b.u32())
		if length == 0xffffffff {
			h.offsetSize = 8
			length = b.u64()
		} else if length >= 0xfffffff0 {
			return units, fmt.Errorf("unit at %#x: reserved length %#x", off, length)
		}
		if b.err != nil || length > uint64(len(info))-b.pos {
			return units, fmt.Errorf("unit at %#x: length %#x past the end of .debug_info", off, length)
		}
		h.end = b.pos + length
		h.version = int(b.u16())
		unitType := byte(1) // DW_UT_compile
		if h.version >= 5 {
			unitType = b.u8()
			h.addrSize = int(b.u8())
			h.abbrevOff = b.offset(h.offsetSize)
		} else {
			h.abbrevOff = b.offset(h.offsetSize)
			h.addrSize = int(b.u8())
		}
		switch unitType {
		case 2, 6: // DW_UT_type, DW_UT_split_type: signature and type offset
			b.skip(8 + uint64(h.offsetSize))
		case 4, 5: // DW_UT_skeleton, DW_UT_split_compile: DWO id
			b.skip(8)
		}
		h.dieOffset = b.pos
		if b.err != nil || h.end > uint64(len(info)) || h.version < 2 || h.version > 5 {
			return units, fmt.Errorf("unit at %#x: bad header", off)
		}
		units = append(units, h)
		off = h.end
	}
	return units, nil
}

// An abbrev is one entry of an abbreviation table: a DIE's tag, whether
// it has children, and the forms of its attributes.
type abbrev struct {
	tag      dwarf.Tag
	children bool
	hasCode  bool // has DW_AT_low_pc or DW_AT_ranges
	named    bool // has DW_AT_name
	declared bool // has DW_AT_declaration as DW_FORM_flag_present: a declaration for sure
	forms    []uint64
	sibling  int // index in forms of DW_AT_sibling, or -1
}

// An abbrevTable maps abbreviation codes to abbreviations. Codes are
// usually numbered from 1, which a slice serves faster than a map.
type abbrevTable struct {
	dense  []*abbrev
	sparse map[uint64]*abbrev
}

func (t abbrevTable) get(code uint64) *abbrev {
	if code < uint64(len(t.dense)) {
		return t.dense[code]
	}
	return t.sparse[code]
}

// parseAbbrevs reads the abbreviation table at off in .debug_abbrev.
func parseAbbrevs(data []byte, off uint64) (abbrevTable, error) {
	b := &scanBuf{data: data, pos: off}
	var t abbrevTable
	for {
		code := b.uleb()
		if code == 0 || b.err != nil {
			break
		}
		a := &abbrev{tag: dwarf.Tag(b.uleb()), children: b.u8() != 0, sibling: -1}
		for {
			attr, form := dwarf.Attr(b.uleb()), b.uleb()
			if attr == 0 && form == 0 || b.err != nil {
				break
			}
			if form == formImplicitConst {
				b.sleb() // the value lives here, not in the DIE
			}
			switch attr {
			case dwarf.AttrLowpc, dwarf.AttrRanges:
				a.hasCode = true
			case dwarf.AttrSibling:
				a.sibling = len(a.forms)
			case dwarf.AttrName:
				a.named = true
			case dwarf.AttrDeclaration:
				a.declared = form == formFlagPresent
			}
			a.forms = append(a.forms, form)
		}
		switch {
		case code < 1<<16 && code <= uint64(2*len(t.dense)+64):
			for uint64(len(t.dense)) <= code {
				t.dense = append(t.dense, nil)
			}
			t.dense[code] = a
		default:
			if t.sparse == nil {
				t.sparse = map[uint64]*abbrev{}
			}
			t.sparse[code] = a
		}
	}
	if b.err != nil {
		return abbrevTable{}, fmt.Errorf("abbreviation table at %#x: %w", off, b.err)
	}
	return t, nil
}

// DWARF forms (DWARF 5 section 7.5.6, and GNU extensions).
const (
	formAddr          = 0x01
	formBlock2        = 0x03
	formBlock4        = 0x04
	formData2         = 0x05
	formData4         = 0x06
	formData8         = 0x07
	formString        = 0x08
	formBlock         = 0x09
	formBlock1        = 0x0a
	formData1         = 0x0b
	formFlag          = 0x0c
	formSdata         = 0x0d
	formStrp          = 0x0e
	formUdata         = 0x0f
	formRefAddr       = 0x10
	formRef1          = 0x11
	formRef2          = 0x12
	formRef4          = 0x13
	formRef8          = 0x14
	formRefUdata      = 0x15
	formIndirect      = 0x16
	formSecOffset     = 0x17
	formExprloc       = 0x18
	formFlagPresent   = 0x19
	formStrx          = 0x1a
	formAddrx         = 0x1b
	formRefSup4       = 0x1c
	formStrpSup       = 0x1d
	formData16        = 0x1e
	formLineStrp      = 0x1f
	formRefSig8       = 0x20
	formImplicitConst = 0x21
	formLoclistx      = 0x22
	formRnglistx      = 0x23
	formRefSup8       = 0x24
	formStrx1         = 0x25
	formStrx2         = 0x26
	formStrx3         = 0x27
	formStrx4         = 0x28
	formAddrx1        = 0x29
	formAddrx2        = 0x2a
	formAddrx3        = 0x2b
	formAddrx4        = 0x2c
	formGNUAddrIndex  = 0x1f01
	formGNUStrIndex   = 0x1f02
	formGNURefAlt     = 0x1f20
	formGNUStrpAlt    = 0x1f21
)

var errUnknownForm = errors.New("unknown attribute form")

// skipValue skips one attribute value of the given form, and returns it
// if the form is a reference within the unit or .debug_info (for
// DW_AT_sibling), as an offset in .debug_info.
func (b *scanBuf) skipValue(form uint64, u *unitHeader) (ref uint64, err error) {
	switch form {
	case formRef1:
		return u.offset + uint64(b.u8()), b.err
	case formRef2:
		return u.offset + uint64(b.u16()), b.err
	case formRef4:
		return u.offset + uint64(b.u32()), b.err
	case formRef8:
		return u.offset + b.u64(), b.err
	case formRefUdata:
		return u.offset + b.uleb(), b.err
	case formRefAddr:
		if u.version == 2 {
			return b.offset(u.addrSize), b.err
		}
		return b.offset(u.offsetSize), b.err
	case formFlagPresent, formImplicitConst:
	case formData1, formFlag, formStrx1, formAddrx1:
		b.skip(1)
	case formData2, formStrx2, formAddrx2:
		b.skip(2)
	case formStrx3, formAddrx3:
		b.skip(3)
	case formData4, formRefSup4, formStrx4, formAddrx4:
		b.skip(4)
	case formData8, formRefSig8, formRefSup8:
		b.skip(8)
	case formData16:
		b.skip(16)
	case formAddr:
		b.skip(uint64(u.addrSize))
	case formStrp, formSecOffset, formStrpSup, formLineStrp, formGNURefAlt, formGNUStrpAlt:
		b.skip(uint64(u.offsetSize))
	case formSdata:
		b.sleb()
	case formUdata, formStrx, formAddrx, formLoclistx, formRnglistx, formGNUAddrIndex, formGNUStrIndex:
		b.uleb()
	case formString:
		b.cstring()
	case formBlock1:
		b.skip(uint64(b.u8()))
	case formBlock2:
		b.skip(uint64(b.u16()))
	case formBlock4:
		b.skip(uint64(b.u32()))
	case formBlock, formExprloc:
		b.skip(b.uleb())
	case formIndirect:
		return b.skipValue(b.uleb(), u)
	default:
		return 0, fmt.Errorf("%w %#x", errUnknownForm, form)
	}
	return 0, b.err
}

// skipAttrs skips the attribute values of a DIE with abbreviation a, and
// returns its DW_AT_sibling (the offset of the DIE after its subtree) or 0.
func (b *scanBuf) skipAttrs(a *abbrev, u *unitHeader) (sibling uint64, err error) {
	for i, form := range a.forms {
		ref, err := b.skipValue(form, u)
		if err != nil {
			return 0, err
		}
		if i == a.sibling {
			sibling = ref
		}
	}
	return sibling, nil
}

// nextDIE reads the next DIE of unit u and skips its attribute values. It
// returns the DIE's offset, its abbreviation and its DW_AT_sibling (0 if
// it has none); the abbreviation is nil for the null entry that ends a
// DIE's children.
func (b *scanBuf) nextDIE(abbrevs abbrevTable, u *unitHeader) (off uint64, a *abbrev, sibling uint64, err error) {
	off = b.pos
	code := b.uleb()
	switch {
	case b.err != nil:
		return off, nil, 0, b.err
	case code == 0:
		return off, nil, 0, nil
	}
	if a = abbrevs.get(code); a == nil {
		return off, nil, 0, fmt.Errorf("DIE at %#x: unknown abbreviation %d", off, code)
	}
	if sibling, err = b.skipAttrs(a, u); err != nil {
		return off, nil, 0, fmt.Errorf("DIE at %#x: %w", off, err)
	}
	return off, a, sibling, nil
}

// skipSubtree moves past the children of the DIE just read, whose
// DW_AT_sibling is sibling: to it if it points ahead within the unit,
// else DIE by DIE.
func (b *scanBuf) skipSubtree(sibling uint64, abbrevs abbrevTable, u *unitHeader) error {
	if sibling > b.pos && sibling <= u.end {
		b.pos = sibling
		return nil
	}
	return b.skipChildren(abbrevs, u)
}

// skipChildren skips the children of the DIE just read, up to and
// including the null entry that ends them.
func (b *scanBuf) skipChildren(abbrevs abbrevTable, u *unitHeader) error {
	for depth := 1; depth > 0; {
		_, a, sibling, err := b.nextDIE(abbrevs, u)
		switch {
		case err != nil:
			return err
		case a == nil:
			depth--
		case !a.children:
		case sibling > b.pos && sibling <= u.end:
			b.pos = sibling // jump over the subtree
		default:
			depth++
		}
	}
	return nil
}

// scanBuf reads DWARF's encodings from a section, remembering the first
// error (reading past the end).
type scanBuf struct {
	data  []byte
	pos   uint64
	order binary.ByteOrder
	err   error
}

var errPastEnd = errors.New("read past the end of the section")

func (b *scanBuf) need(n uint64) bool {
	if b.err != nil {
		return false
	}
	if n > uint64(len(b.data)) || b.pos > uint64(len(b.data))-n {
		b.err = errPastEnd
		b.pos = uint64(len(b.data))
		return false
	}
	return true
}

func (b *scanBuf) skip(n uint64) {
	if b.need(n) {
		b.pos += n
	}
}

func (b *scanBuf) u8() byte {
	if !b.need(1) {
		return 0
	}
	b.pos++
	return b.data[b.pos-1]
}

func (b *scanBuf) u16() uint16 {
	if !b.need(2) {
		return 0
	}
	b.pos += 2
	return b.order.Uint16(b.data[b.pos-2:])
}

func (b *scanBuf) u32() uint32 {
	if !b.need(4) {
		return 0
	}
	b.pos += 4
	return b.order.Uint32(b.data[b.pos-4:])
}

func (b *scanBuf) u64() uint64 {
	if !b.need(8) {
		return 0
	}
	b.pos += 8
	return b.order.Uint64(b.data[b.pos-8:])
}

func (b *scanBuf) offset(size int) uint64 {
	switch size {
	case 8:
		return b.u64()
	case 4:
		return uint64(b.u32())
	case 2:
		return uint64(b.u16())
	}
	b.err = fmt.Errorf("unsupported offset size %d", size)
	return 0
}

func (b *scanBuf) uleb() uint64 {
	if !b.need(1) {
		return 0
	}
	v, n := ULEB128(b.data[b.pos:])
	b.leb(n)
	return v
}

func (b *scanBuf) sleb() int64 {
	if !b.need(1) {
		return 0
	}
	v, n := SLEB128(b.data[b.pos:])
	b.leb(n)
	return v
}

// leb moves past a LEB128 number of n bytes, 0 if the data ended in it.
func (b *scanBuf) leb(n int) {
	if n == 0 {
		b.err, b.pos = errPastEnd, uint64(len(b.data))
		return
	}
	b.pos += uint64(n)
}

func (b *scanBuf) cstring() {
	for b.err == nil && b.u8() != 0 {
	}
}
