package symbolize

import (
	"bytes"
	"debug/dwarf"
	"encoding/binary"
	"fmt"
	"slices"
)

// dwarfInfo answers address queries from DWARF. It reads only the
// compilation unit headers up front; a unit's DIEs and line table are
// decoded the first time an address falls into it, and kept.
type dwarfInfo struct {
	data   *dwarf.Data
	reader *dwarf.Reader // for random access by offset
	units  []*compUnit
	index  spanIndex // address -> index into units
	alt    *altDWARF // the dwz supplementary file, or nil
	split  int       // how many units are skeletons of split DWARF

	// For the DIE scanner: the raw sections and the abbreviation tables
	// read so far, by offset.
	info, abbrev []byte
	order        binary.ByteOrder
	abbrevs      map[uint64]abbrevTable
	lineSections lineSections

	names     map[dieRef]nameAttrs // resolved DW_AT_abstract_origin/specification targets
	demangled map[string]string
}

// altDWARF is a supplementary debug file (.gnu_debugaltlink), which holds
// the DIEs and strings that dwz found in several files.
type altDWARF struct {
	data   *dwarf.Data
	reader *dwarf.Reader
	str    []byte // its .debug_str, for DW_FORM_GNU_strp_alt
}

// A dieRef locates a DIE in the main DWARF or in the supplementary file.
type dieRef struct {
	off dwarf.Offset
	alt bool
}

// compUnit is one compilation unit, loaded on first use.
type compUnit struct {
	offset  dwarf.Offset // of the DW_TAG_compile_unit DIE
	header  *unitHeader  // nil if it could not be parsed
	loaded  bool
	err     error
	compDir string

	lines  *lineTable
	scopes []scope
	funcs  spanIndex // address -> the out-of-line function (index into scopes)
}

// A scope is a function with code: an out-of-line subprogram, or one
// inlined copy of a function (DW_TAG_inlined_subroutine) inside another
// scope.
type scope struct {
	nameAttrs
	entry    uint64 // the start of the first range: the entry, for out-of-line functions
	callFile int64  // for inlined copies: where the call was, in the enclosing scope's code
	callLine int64
	inlines  spanIndex // the inlined copies directly inside this one (index into scopes)
}

// nameAttrs are what a DIE says about its function's name.
type nameAttrs struct {
	linkage string // DW_AT_linkage_name, mangled
	name    string // DW_AT_name
	origin  dieRef // DW_AT_abstract_origin or DW_AT_specification; offset 0 if none
}

// rawDWARF is a dwarf.Data with the raw sections read beside it.
type rawDWARF struct {
	data         *dwarf.Data
	info, abbrev []byte
	aranges      []byte // nil if absent
	lines        lineSections
	order        binary.ByteOrder
}

// newDwarfInfo indexes the compilation units of raw by address.
//
//  1. Read every compilation unit's top DIE (cheap: SkipChildren jumps to
//     the next unit without decoding the children), and every unit
//     header.
//  2. Take each unit's address ranges from .debug_aranges when it lists
//     the unit, else from the unit's DW_AT_low_pc/high_pc or DW_AT_ranges
//     (as clang and Go, which write no .debug_aranges, need).
func newDwarfInfo(raw rawDWARF, alt *altDWARF) (*dwarfInfo, error) {
	d := raw.data
	x := &dwarfInfo{
		data:         d,
		reader:       d.Reader(),
		alt:          alt,
		info:         raw.info,
		abbrev:       raw.abbrev,
		order:        raw.order,
		abbrevs:      map[uint64]abbrevTable{},
		lineSections: raw.lines,
		names:        map[dieRef]nameAttrs{},
		demangled:    map[string]string{},
	}
	// A header that cannot be parsed leaves the units from there on
	// without one; they are then skipped.
	headers, _ := parseUnitHeaders(raw.info, raw.order)
	byDIE := map[uint64]*unitHeader{}
	for i := range headers {
		byDIE[headers[i].dieOffset] = &headers[i]
	}

	var unitRanges [][][2]uint64
	unitAt := map[uint64]int{} // header offset -> index into x.units
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			if len(x.units) == 0 {
				return nil, fmt.Errorf("reading compilation units: %w", err)
			}
			break // keep the units before the damage
		}
		if e == nil {
			break
		}
		r.SkipChildren()
		if e.Tag != dwarf.TagCompileUnit && e.Tag != tagSkeletonUnit {
			continue // type and partial units hold no code
		}
		ranges, err := d.Ranges(e)
		if err != nil {
			ranges = nil // .debug_aranges may still know; else the unit is skipped
		}
		if e.Tag == tagSkeletonUnit {
			x.split++
		}
		u := &compUnit{offset: e.Offset, header: byDIE[uint64(e.Offset)]}
		if u.header != nil {
			unitAt[u.header.offset] = len(x.units)
		}
		x.units = append(x.units, u)
		unitRanges = append(unitRanges, ranges)
	}

	if raw.aranges != nil {
		if byHeader, err := parseAranges(raw.aranges, raw.order); err == nil {
			for header, ranges := range byHeader {
				if i, ok := unitAt[header]; ok {
					unitRanges[i] = ranges
				}
			}
		}
	}

	var spans []span
	for i, ranges := range unitRanges {
		for _, r := range ranges {
			spans = append(spans, span{lo: r[0], hi: r[1], id: int32(i)})
		}
	}
	x.index = newSpanIndex(spans)
	return x, nil
}

// frames returns the source frames at addr, innermost first, or nil if
// DWARF knows nothing about addr. symbol looks up the ELF symbol holding
// an address, for the cases where it names a function better.
func (x *dwarfInfo) frames(addr uint64, symbol func(uint64) (name string, start uint64, mangled bool)) []Frame {
	i := x.index.find(addr)
	if i < 0 {
		return nil
	}
	u := x.units[i]
	if !u.loaded {
		u.err = x.load(u)
		u.loaded = true
	}
	if u.err != nil {
		return nil
	}

	file, line := u.lines.find(addr)
	var chain []int32 // the real function first, then each inlined copy inside the previous one
	for s := u.funcs.find(addr); s >= 0; s = u.scopes[s].inlines.find(addr) {
		chain = append(chain, s)
	}
	if len(chain) == 0 {
		if file == "" && line == 0 {
			return nil
		}
		// Line information without a function: assembly sources.
		name, _, _ := symbol(addr)
		return []Frame{{Function: name, File: file, Line: line}}
	}

	// The innermost frame is where the line table says addr is; each
	// inlined copy's call site is where its caller is.
	frames := make([]Frame, len(chain))
	for i := range chain {
		s := &u.scopes[chain[len(chain)-1-i]]
		name, _ := x.functionName(s.nameAttrs)
		frames[i] = Frame{Function: name, File: file, Line: line}
		file, line = u.lines.file(s.callFile), int(s.callLine)
	}

	// A C++ function without a linkage name (a lambda, a method of a
	// local class) has only its short DW_AT_name, "operator()". A mangled
	// ELF symbol that starts at its entry is the same function with its
	// full name, "ns::f()::{lambda()#1}::operator()() const": prefer it,
	// as binutils does. Unlike binutils, do not for the split-off parts
	// (f.cold, f.part.0), which are still f in the source.
	outer := &frames[len(frames)-1]
	if _, linkage := x.functionName(u.scopes[chain[0]].nameAttrs); !linkage {
		name, start, mangled := symbol(addr)
		if outer.Function == "" || mangled && start == u.scopes[chain[0]].entry {
			outer.Function = name
		}
	}
	return frames
}

// load decodes the line table of u and indexes its functions.
//
// The DIE tree is scanned once (see scan.go) with a stack of the scope
// each level belongs to. A subprogram with code starts a new out-of-line
// function; an inlined_subroutine with code starts a scope inside the
// enclosing one; other DIEs (lexical blocks, namespaces) belong to their
// parent's scope. Only the DIEs that start a scope are decoded. Subtrees
// that cannot hold code are skipped, in one jump when the compiler wrote
// DW_AT_sibling: subprograms without code (declarations, abstract
// instances), call sites, types (see mayHoldCode).
func (x *dwarfInfo) load(u *compUnit) error {
	r := x.data.Reader()
	r.Seek(u.offset)
	cu, err := r.Next()
	if err != nil {
		return err
	}
	if cu == nil || cu.Tag != dwarf.TagCompileUnit && cu.Tag != tagSkeletonUnit {
		return fmt.Errorf("no compilation unit at offset %#x", u.offset)
	}
	u.compDir, _ = cu.Val(dwarf.AttrCompDir).(string)
	u.lines, err = readLineTable(x.data, x.lineSections, cu, u.compDir)
	if err != nil {
		u.lines = nil // functions without lines are still worth having
	}
	h := u.header
	if h == nil {
		return fmt.Errorf("compilation unit at %#x: no header", u.offset)
	}
	abbrevs, err := x.abbrevsOf(h)
	if err != nil {
		return err
	}

	var funcSpans []span
	var inlineSpans [][]span // by scope
	var stack []int32        // scope of the current level's DIEs; -1: none
	b := &scanBuf{data: x.info[:h.end], pos: h.dieOffset, order: x.order}
	for b.pos < h.end {
		off, a, sibling, err := b.nextDIE(abbrevs, h)
		if err != nil {
			return err
		}
		if a == nil {
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			if len(stack) == 0 {
				break
			}
			continue
		}
		if off == h.dieOffset { // the compilation unit itself
			if !a.children {
				break
			}
			stack = append(stack, -1)
			continue
		}

		parent := stack[len(stack)-1]
		current := parent
		isFunc := a.tag == dwarf.TagSubprogram || a.tag == dwarf.TagInlinedSubroutine
		var ranges [][2]uint64
		if isFunc && a.hasCode {
			r.Seek(dwarf.Offset(off))
			e, err := r.Next()
			if err != nil {
				return err
			}
			ranges, _ = x.data.Ranges(e)
			if len(ranges) > 0 {
				current = int32(len(u.scopes))
				s := scope{nameAttrs: x.nameAttrsOf(e, false), entry: ranges[0][0]}
				spans := make([]span, len(ranges))
				for i, r := range ranges {
					spans[i] = span{lo: r[0], hi: r[1], id: current}
				}
				if a.tag == dwarf.TagInlinedSubroutine && parent >= 0 {
					s.callFile, _ = e.Val(dwarf.AttrCallFile).(int64)
					s.callLine, _ = e.Val(dwarf.AttrCallLine).(int64)
					inlineSpans[parent] = append(inlineSpans[parent], spans...)
				} else {
					funcSpans = append(funcSpans, spans...)
				}
				u.scopes = append(u.scopes, s)
				inlineSpans = append(inlineSpans, nil)
			}
		}
		if !a.children {
			continue
		}
		if a.tag == dwarf.TagSubprogram && len(ranges) == 0 || !mayHoldCode(a.tag, parent >= 0) {
			if err := b.skipSubtree(sibling, abbrevs, h); err != nil {
				return err
			}
			continue
		}
		stack = append(stack, current)
	}

	u.funcs = newSpanIndex(funcSpans)
	for i, spans := range inlineSpans {
		if len(spans) > 0 {
			u.scopes[i].inlines = newSpanIndex(spans)
		}
	}
	u.scopes = slices.Clip(u.scopes)
	return nil
}

// abbrevsOf returns the abbreviation table of the unit with header h,
// parsing it the first time a unit asks for it.
func (x *dwarfInfo) abbrevsOf(h *unitHeader) (abbrevTable, error) {
	if abbrevs, ok := x.abbrevs[h.abbrevOff]; ok {
		return abbrevs, nil
	}
	abbrevs, err := parseAbbrevs(x.abbrev, h.abbrevOff)
	if err != nil {
		return abbrevTable{}, err
	}
	x.abbrevs[h.abbrevOff] = abbrevs
	return abbrevs, nil
}

// DWARF tags that debug/dwarf does not name.
const (
	// The unit that -gsplit-dwarf leaves in the program: it has the line
	// table, while the DIEs of functions are in a .dwo file.
	tagSkeletonUnit dwarf.Tag = 0x4a

	tagGNUCallSite              dwarf.Tag = 0x4109
	tagGNUTemplateParameterPack dwarf.Tag = 0x4107
	tagGNUFormalParameterPack   dwarf.Tag = 0x4108
	tagGNUTemplateTemplateParam dwarf.Tag = 0x4106
	tagCallSite                 dwarf.Tag = 0x48
	tagCallSiteParameter        dwarf.Tag = 0x49
)

// mayHoldCode reports whether a DIE with this tag may have subprograms or
// inlined subroutines with code among its descendants. Types may, but
// only inside a function: GCC nests the member functions of a local class
// in the class, and puts those of other classes at namespace level.
func mayHoldCode(tag dwarf.Tag, insideFunction bool) bool {
	switch tag {
	case dwarf.TagStructType, dwarf.TagClassType, dwarf.TagUnionType:
		return insideFunction
	case dwarf.TagEnumerationType, dwarf.TagArrayType, dwarf.TagSubroutineType,
		dwarf.TagFormalParameter, dwarf.TagVariable,
		dwarf.TagTemplateTypeParameter, dwarf.TagTemplateValueParameter,
		tagCallSite, tagCallSiteParameter, tagGNUCallSite,
		tagGNUTemplateParameterPack, tagGNUFormalParameterPack, tagGNUTemplateTemplateParam:
		return false
	}
	return true
}

// attrMIPSLinkageName is the linkage name attribute of DWARF before
// version 4, still written by some compilers.
const attrMIPSLinkageName dwarf.Attr = 0x2007

// nameAttrsOf reads the name attributes of e, a DIE of the supplementary
// file if inAlt.
func (x *dwarfInfo) nameAttrsOf(e *dwarf.Entry, inAlt bool) nameAttrs {
	var a nameAttrs
	a.linkage = x.stringAttr(e, dwarf.AttrLinkageName)
	if a.linkage == "" {
		a.linkage = x.stringAttr(e, attrMIPSLinkageName)
	}
	a.name = x.stringAttr(e, dwarf.AttrName)
	for _, attr := range []dwarf.Attr{dwarf.AttrAbstractOrigin, dwarf.AttrSpecification} {
		f := e.AttrField(attr)
		if f == nil {
			continue
		}
		switch v := f.Val.(type) {
		case dwarf.Offset:
			a.origin = dieRef{off: v, alt: inAlt}
		case int64:
			if f.Class == dwarf.ClassReferenceAlt {
				a.origin = dieRef{off: dwarf.Offset(v), alt: true}
			}
		}
		break
	}
	return a
}

// stringAttr returns the string value of attribute attr of e, looking up
// strings moved to the supplementary file (DW_FORM_GNU_strp_alt).
func (x *dwarfInfo) stringAttr(e *dwarf.Entry, attr dwarf.Attr) string {
	f := e.AttrField(attr)
	if f == nil {
		return ""
	}
	switch v := f.Val.(type) {
	case string:
		return v
	case int64:
		if f.Class == dwarf.ClassStringAlt && x.alt != nil && v >= 0 && v < int64(len(x.alt.str)) {
			str := x.alt.str[v:]
			if end := bytes.IndexByte(str, 0); end >= 0 {
				return string(str[:end])
			}
		}
	}
	return ""
}

// functionName names the function a scope belongs to, and reports whether
// the name comes from a linkage name. A linkage name, found on the DIE or
// on what its DW_AT_abstract_origin or DW_AT_specification chain leads
// to, is preferred because it demangles to the qualified C++ name with
// parameter types; else the nearest DW_AT_name is used as is.
func (x *dwarfInfo) functionName(a nameAttrs) (name string, linkage bool) {
	if a.linkage == "" && a.origin.off != 0 {
		target := x.resolve(a.origin)
		a.linkage = target.linkage
		if a.name == "" {
			a.name = target.name
		}
	}
	if a.linkage != "" {
		return x.demangle(a.linkage), true
	}
	return a.name, false
}

// resolve returns the name attributes of the DIE at ref, with its own
// origin chain followed. Targets may be in another unit
// (DW_FORM_ref_addr) or in the supplementary file (DW_FORM_GNU_ref_alt).
func (x *dwarfInfo) resolve(ref dieRef) nameAttrs {
	if a, ok := x.names[ref]; ok {
		return a
	}
	x.names[ref] = nameAttrs{} // breaks reference cycles in corrupt DWARF
	r := x.reader
	if ref.alt {
		if x.alt == nil {
			return nameAttrs{}
		}
		r = x.alt.reader
	}
	r.Seek(ref.off)
	e, err := r.Next()
	if err != nil || e == nil {
		return nameAttrs{}
	}
	a := x.nameAttrsOf(e, ref.alt)
	if a.linkage == "" && a.origin.off != 0 {
		target := x.resolve(a.origin)
		a.linkage = target.linkage
		if a.name == "" {
			a.name = target.name
		}
	}
	a.origin = dieRef{}
	x.names[ref] = a
	return a
}

func (x *dwarfInfo) demangle(name string) string {
	if d, ok := x.demangled[name]; ok {
		return d
	}
	d := demangleName(name)
	x.demangled[name] = d
	return d
}
