package symbolize

import (
	"cmp"
	"debug/dwarf"
	"slices"
	"strings"
)

// Type is a named type of a program with its size, as an object's DWARF
// describes it: what a block of that many bytes may hold.
type Type struct {
	// Name is the type's name, qualified with the namespaces and classes
	// that enclose it in C++ ("ns::Shape::Inner"), and for a typedef the
	// typedef's own name ("widget" for typedef struct {...} widget).
	Name string
	Size uint64 // in bytes, at least 1
}

// Types returns the named types of o's DWARF that have a size, each
// (name, size) once, sorted by name then size. A name may come with
// several sizes when compilation units define it differently. It returns
// nil for an object without usable DWARF, or one whose build-id is not the
// process's.
//
// The types are:
//
//   - complete structs, classes and unions with a name and DW_AT_byte_size;
//   - typedefs whose target, through typedefs, const and volatile, is a
//     sized struct, class, union, base, enumeration or array type, with
//     the target's size: typedef struct {...} widget names an anonymous
//     struct.
//
// Names are qualified with the namespaces and classes around them in the
// DWARF tree; types local to a function are named as they are.
//
// Left out, because no block of the heap is one of them or they only
// repeat another type's name: anonymous types (unless a typedef names
// them), declarations, types of size 0, typedefs of pointers and
// functions, typedefs that are class members (std::vector<int>::size_type
// and the thousands like it in C++ programs), C++ classes of size 1
// without data members (allocators, traits and tag types), and names
// outside any namespace that are reserved to the implementation (see
// reservedName). Types only in a dwz supplementary file or in .debug_types
// (DWARF 4 type units) are not read; DWARF 5 type units are.
//
// If there are more than max types (and max > 0), the max with the
// shortest names are kept: the names people write (widget, ns::Shape,
// std::string) rather than template instantiations spelled out with all
// their arguments.
//
// It scans every DIE of every unit, decoding only the DIEs of types, so it
// takes time in proportion to the size of .debug_info (4 to 10 ms a MiB
// on the machine of docs/performance.md; see BenchmarkTypes):
// call it for the program's own objects, not for every system library.
func (o *Object) Types(max int) []Type {
	if o.status == Mismatch || o.dwarf == nil {
		return nil
	}
	o.mu.Lock()
	types := o.dwarf.types()
	o.mu.Unlock()
	if max > 0 && len(types) > max {
		// Stable: among names of one length, the first by name are kept.
		slices.SortStableFunc(types, func(a, b Type) int { return cmp.Compare(len(a.Name), len(b.Name)) })
		types = types[:max]
		sortTypes(types)
	}
	return types
}

// sortTypes sorts types by name, then size.
func sortTypes(types []Type) { slices.SortFunc(types, compareTypes) }

func compareTypes(a, b Type) int {
	return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Size, b.Size))
}

// typeScanner collects the types of one object's DWARF.
type typeScanner struct {
	x        *dwarfInfo
	reader   *dwarf.Reader           // of the object's DWARF, for random access by offset
	resolved map[dieRef]resolvedType // typedef targets and array elements seen so far
	found    map[Type]struct{}
}

// resolvedType is what a reference to a type leads to once typedefs,
// const and volatile are stripped: the tag of the type, and its size if
// known.
type resolvedType struct {
	tag   dwarf.Tag
	size  uint64
	known bool
}

// maxTypeChain bounds the typedefs, qualifiers and array dimensions
// followed from one type, in case damaged DWARF makes them a long chain.
const maxTypeChain = 64

// types scans the units of x for types.
//
//  1. Walk the DIE tree of every unit with the DIE scanner (scan.go),
//     keeping a typeLevel for each level: namespaces and named structs,
//     classes and unions add their name to the prefix of their children;
//     a function starts afresh (its local types are named as they are).
//  2. Decode, with debug/dwarf, only the DIEs the abbreviation says may
//     give a type or a name: named namespaces, structs, classes and
//     unions, and named typedefs outside classes.
//  3. Keep a struct, class or union once its children are done, when
//     whether it has data members is known.
//  4. Follow each typedef's DW_AT_type through typedefs, const and
//     volatile, remembering every target resolved: many typedefs share
//     one.
func (x *dwarfInfo) types() []Type {
	s := &typeScanner{x: x, reader: x.data.Reader(), resolved: map[dieRef]resolvedType{}, found: map[Type]struct{}{}}
	// A header that cannot be parsed ends the walk, keeping what the
	// units before it gave.
	headers, _ := parseUnitHeaders(x.info, x.order)
	for i := range headers {
		// A damaged unit keeps the types found before the damage.
		s.scanUnit(&headers[i])
	}
	types := make([]Type, 0, len(s.found))
	for t := range s.found {
		types = append(types, t)
	}
	sortTypes(types)
	return types
}

// A typeLevel is a level of the DIE tree being scanned: the children of
// one DIE.
type typeLevel struct {
	prefix string // the qualified name prefix of the children: "ns::Shape::", or ""
	inType bool   // the DIE is a struct, class or union: its typedefs are members
	// record is the sized struct, class or union the children belong to,
	// kept when its children are done if it holds data; "" if none.
	record  string
	size    uint64
	hasData bool
}

// scanUnit collects the types of the unit with header h.
func (s *typeScanner) scanUnit(h *unitHeader) error {
	x := s.x
	abbrevs, err := x.abbrevsOf(h)
	if err != nil {
		return err
	}
	var levels []typeLevel
	b := &scanBuf{data: x.info[:h.end], pos: h.dieOffset, order: x.order}
	for b.pos < h.end {
		off, a, sibling, err := b.nextDIE(abbrevs, h)
		if err != nil {
			return err
		}
		if a == nil {
			if len(levels) > 0 {
				s.endLevel(&levels[len(levels)-1])
				levels = levels[:len(levels)-1]
			}
			if len(levels) == 0 {
				return nil
			}
			continue
		}
		if off == h.dieOffset { // the unit itself
			if !a.children {
				return nil
			}
			levels = append(levels, typeLevel{})
			continue
		}
		parent := &levels[len(levels)-1]
		s.visit(a, dwarf.Offset(off), parent)
		if !a.children {
			continue
		}
		if !mayHoldTypes(a.tag) {
			if err := b.skipSubtree(sibling, abbrevs, h); err != nil {
				return err
			}
			continue
		}
		levels = append(levels, s.level(a, dwarf.Offset(off), parent.prefix))
	}
	return nil
}

// visit takes in the DIE at off, with abbreviation a, a child of the DIE
// of level parent; DIEs with children are taken in by level too.
func (s *typeScanner) visit(a *abbrev, off dwarf.Offset, parent *typeLevel) {
	switch {
	case a.tag == dwarf.TagMember && !a.declared:
		parent.hasData = true
	case a.tag == dwarf.TagTypedef && a.named && !parent.inType:
		s.typedefAt(off, parent.prefix)
	case isRecordType(a.tag) && a.named && !a.children && !a.declared:
		// No members: in C++ an empty class, of size 1.
		if name, size, ok := s.recordAt(off, parent.prefix); ok && size > 1 {
			s.add(name, size)
		}
	}
}

// level returns the level of the children of the DIE at off, which has
// abbreviation a and whose own level has the name prefix prefix.
func (s *typeScanner) level(a *abbrev, off dwarf.Offset, prefix string) typeLevel {
	switch {
	case a.tag == dwarf.TagNamespace && !a.named:
		return typeLevel{prefix: prefix + "(anonymous namespace)::"}
	case a.tag == dwarf.TagNamespace:
		if e := s.entry(off); e != nil {
			return typeLevel{prefix: prefix + s.x.stringAttr(e, dwarf.AttrName) + "::"}
		}
	case isRecordType(a.tag) && a.named:
		name, size, ok := s.recordAt(off, prefix)
		if name == "" {
			return typeLevel{prefix: prefix, inType: true}
		}
		l := typeLevel{prefix: name + "::", inType: true}
		if ok {
			l.record, l.size = name, size
		}
		return l
	case isRecordType(a.tag):
		return typeLevel{prefix: prefix, inType: true}
	case a.tag == dwarf.TagSubprogram:
		return typeLevel{}
	}
	return typeLevel{prefix: prefix}
}

// endLevel keeps the struct, class or union whose children end here, if
// it holds data: a C++ class of size 1 without data members is empty (an
// allocator, a traits class, a tag type), and a block holds none.
func (s *typeScanner) endLevel(l *typeLevel) {
	if l.record != "" && (l.size > 1 || l.hasData) {
		s.add(l.record, l.size)
	}
}

// recordAt decodes the named struct, class or union at off, whose
// enclosing scopes' names make prefix. It returns its qualified name, and
// its size if it is complete.
func (s *typeScanner) recordAt(off dwarf.Offset, prefix string) (name string, size uint64, ok bool) {
	e := s.entry(off)
	if e == nil {
		return "", 0, false
	}
	if name = s.x.stringAttr(e, dwarf.AttrName); name == "" {
		return "", 0, false
	}
	name = prefix + name
	if decl, _ := e.Val(dwarf.AttrDeclaration).(bool); decl {
		return name, 0, false
	}
	n, ok := e.Val(dwarf.AttrByteSize).(int64)
	return name, uint64(n), ok && n > 0
}

// typedefAt collects the typedef at off, whose enclosing scopes' names
// make prefix, if it names a sized type that is not a pointer.
func (s *typeScanner) typedefAt(off dwarf.Offset, prefix string) {
	e := s.entry(off)
	if e == nil {
		return
	}
	name := s.x.stringAttr(e, dwarf.AttrName)
	target, ok := typeRef(e, false)
	if name == "" || !ok {
		return
	}
	if t := s.resolve(target, 0); t.known && namesSizedType(t.tag) {
		s.add(prefix+name, t.size)
	}
}

// add collects a type, unless it is empty or its name is reserved.
func (s *typeScanner) add(name string, size uint64) {
	if size == 0 || int64(size) < 0 || reservedName(name) {
		return
	}
	s.found[Type{Name: name, Size: size}] = struct{}{}
}

// entry decodes the DIE at off of the object's own DWARF.
func (s *typeScanner) entry(off dwarf.Offset) *dwarf.Entry {
	s.reader.Seek(off)
	e, err := s.reader.Next()
	if err != nil {
		return nil
	}
	return e
}

// resolve returns the type ref leads to through typedefs, const and
// volatile, with its size: DW_AT_byte_size, or for an array without it,
// its element's size times its number of elements. depth counts the
// references followed to get here.
func (s *typeScanner) resolve(ref dieRef, depth int) resolvedType {
	if t, ok := s.resolved[ref]; ok {
		return t
	}
	s.resolved[ref] = resolvedType{} // breaks reference cycles in damaged DWARF
	if depth > maxTypeChain {
		return resolvedType{}
	}
	r := s.reader
	if ref.alt {
		if s.x.alt == nil {
			return resolvedType{}
		}
		r = s.x.alt.reader
	}
	r.Seek(ref.off)
	e, err := r.Next()
	if err != nil || e == nil {
		return resolvedType{}
	}
	t := resolvedType{tag: e.Tag}
	if size, ok := e.Val(dwarf.AttrByteSize).(int64); ok && size >= 0 {
		t.size, t.known = uint64(size), true
	}
	switch e.Tag {
	case dwarf.TagTypedef, dwarf.TagConstType, dwarf.TagVolatileType:
		t = resolvedType{}
		if target, ok := typeRef(e, ref.alt); ok {
			t = s.resolve(target, depth+1)
		}
	case dwarf.TagArrayType:
		if !t.known {
			t.size, t.known = s.arraySize(r, e, ref.alt, depth)
		}
	}
	s.resolved[ref] = t
	return t
}

// maxTypeSize bounds the sizes of arrays worked out from their elements:
// a larger one comes from a bound that does not say what it seems to (a
// zero-length array's upper bound of 2^32 - 1).
const maxTypeSize = 1 << 40

// arraySize works out the size of the array type e, just read from r, from
// its dimensions (its DW_TAG_subrange_type children) and its element type.
func (s *typeScanner) arraySize(r *dwarf.Reader, e *dwarf.Entry, inAlt bool, depth int) (uint64, bool) {
	if !e.Children {
		return 0, false
	}
	// The children first: resolving the element moves r.
	count, dims := uint64(1), 0
	for {
		c, err := r.Next()
		if err != nil || c == nil {
			return 0, false
		}
		if c.Tag == 0 {
			break
		}
		if c.Children {
			r.SkipChildren()
		}
		if c.Tag != dwarf.TagSubrangeType {
			continue
		}
		n, ok := subrangeCount(c)
		if !ok || n > 0 && count > maxTypeSize/n {
			return 0, false
		}
		count *= n
		dims++
	}
	target, ok := typeRef(e, inAlt)
	if dims == 0 || !ok {
		return 0, false
	}
	elem := s.resolve(target, depth+1)
	if !elem.known || elem.size > 0 && count > maxTypeSize/elem.size {
		return 0, false
	}
	return count * elem.size, true
}

// subrangeCount returns the number of elements of an array dimension:
// DW_AT_count, or DW_AT_upper_bound - DW_AT_lower_bound + 1 (the lower
// bound is 0 unless given, as in C and C++). A bound that is not a
// constant (a variable-length array) or is missing (a flexible array
// member) leaves it unknown.
func subrangeCount(e *dwarf.Entry) (uint64, bool) {
	if n, ok := e.Val(dwarf.AttrCount).(int64); ok {
		return uint64(n), n >= 0
	}
	upper, ok := e.Val(dwarf.AttrUpperBound).(int64)
	if !ok {
		return 0, false
	}
	lower, _ := e.Val(dwarf.AttrLowerBound).(int64)
	if upper < lower-1 {
		return 0, false
	}
	return uint64(upper - lower + 1), true
}

// typeRef returns the DW_AT_type of e, a DIE of the supplementary file if
// inAlt. References to type units (DW_FORM_ref_sig8) are not followed.
func typeRef(e *dwarf.Entry, inAlt bool) (dieRef, bool) {
	f := e.AttrField(dwarf.AttrType)
	if f == nil {
		return dieRef{}, false
	}
	switch v := f.Val.(type) {
	case dwarf.Offset:
		return dieRef{off: v, alt: inAlt}, true
	case int64:
		if f.Class == dwarf.ClassReferenceAlt {
			return dieRef{off: dwarf.Offset(v), alt: true}, true
		}
	}
	return dieRef{}, false
}

// isRecordType reports whether tag is that of a struct, class or union.
func isRecordType(tag dwarf.Tag) bool {
	return tag == dwarf.TagStructType || tag == dwarf.TagClassType || tag == dwarf.TagUnionType
}

// namesSizedType reports whether a typedef of a type with this tag (and a
// size) is kept: not one of a pointer, a function or a pointer to member.
func namesSizedType(tag dwarf.Tag) bool {
	switch tag {
	case dwarf.TagStructType, dwarf.TagClassType, dwarf.TagUnionType,
		dwarf.TagBaseType, dwarf.TagEnumerationType, dwarf.TagArrayType:
		return true
	}
	return false
}

// mayHoldTypes reports whether a DIE with this tag may have named types
// among its descendants. Enumerators, array dimensions, parameters and
// template arguments cannot hold any.
func mayHoldTypes(tag dwarf.Tag) bool {
	switch tag {
	case dwarf.TagEnumerationType, dwarf.TagArrayType, dwarf.TagSubroutineType,
		dwarf.TagFormalParameter, dwarf.TagTemplateTypeParameter, dwarf.TagTemplateValueParameter,
		tagCallSite, tagCallSiteParameter, tagGNUCallSite,
		tagGNUTemplateParameterPack, tagGNUFormalParameterPack, tagGNUTemplateTemplateParam:
		return false
	}
	return true
}

// reservedName reports whether name is a name outside any namespace or
// class that C and C++ reserve to the implementation: one starting with
// "__", or with "_" and a capital letter (_IO_FILE, __pthread_mutex_s,
// __off_t). Those are the C library's internals, which the program's
// headers bring into its DWARF. Names in namespaces are kept: the nodes
// that C++ containers allocate are std::_Rb_tree_node<...> and the like.
func reservedName(name string) bool {
	return len(name) >= 2 && name[0] == '_' && (name[1] == '_' || name[1] >= 'A' && name[1] <= 'Z') &&
		!strings.Contains(name, "::")
}
