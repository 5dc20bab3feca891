// Package symbolize turns addresses in ELF files into source frames:
// function, file and line, with the functions the compiler inlined there.
//
// The recorder stores each stack frame as a module and the address in that
// module's link-time view (the runtime pc minus the load bias). At the end
// of a recording it opens each module with [Open] and asks for the
// [Frame]s of every address it saw, so that the trace can be read on a
// machine that does not have the program.
//
// # Where the answers come from
//
// DWARF (versions 2 to 5, sections compressed with zlib or zstd, or in
// the older .zdebug form) in the file itself, or in a separate debug file
// found by build-id or .gnu_debuglink (see [Options]), with the
// supplementary file of dwz (.gnu_debugaltlink) when there is one. Without
// DWARF, function names come from the ELF symbol tables, .symtab then
// .dynsym, and File and Line stay empty.
//
// # How addresses are looked up
//
//  1. Open reads the DWARF sections and the compilation unit headers, and
//     indexes the units by address (.debug_aranges, else each unit's
//     ranges).
//  2. The first address in a unit loads it: its line table is decoded
//     into sorted rows, and its DIEs are scanned for subprograms and
//     inlined subroutines with code, which are indexed by address, each
//     inlined copy inside the function or copy that holds it.
//  3. An address then costs a few binary searches: the unit, the
//     function, each level of inlined copies, the line row. The
//     innermost frame's file and line are the line table's; each inlined
//     copy's DW_AT_call_file and DW_AT_call_line are those of the frame
//     around it.
//
// # Types
//
// [Object.Types] lists the named types of the program's DWARF with their
// sizes, so that a block of the heap can be given the names of the types
// of its size, as mprof's allocation bins are.
//
// Known limits: the .dwo files of split DWARF are not read (lines and
// symbol names still are), nor is MiniDebugInfo (.gnu_debugdata).
package symbolize

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/ianlancetaylor/demangle"
	"github.com/klauspost/compress/zlib"

	"github.com/memtrail/memtrail/internal/usercache"
)

// Frame is one source-level frame.
type Frame struct {
	// Function is the function's name: demangled for C++
	// ("ns::Widget::make()"), as is for C. "" if unknown.
	Function string
	// File is the source file, absolute when the debug info allows
	// (relative names are joined to the compilation directory). "" if
	// unknown.
	File string
	// Line is the line in File, 0 if unknown.
	Line int
}

// Status says how much an [Object] can tell.
type Status int

const (
	// Full: functions, files and lines from DWARF.
	Full Status = iota
	// NoDebug: function names from the ELF symbol tables only.
	NoDebug
	// Missing: the file could not be read. Open returns an error instead of
	// an Object then; the constant is for callers that record the outcome.
	Missing
	// Mismatch: the file's build-id differs from the one the process had,
	// so its addresses mean nothing; Frames returns nil.
	Mismatch
	// Stripped: no symbols and no debug info at all.
	Stripped
)

func (s Status) String() string {
	switch s {
	case Full:
		return "full"
	case NoDebug:
		return "nodebug"
	case Missing:
		return "missing"
	case Mismatch:
		return "mismatch"
	case Stripped:
		return "stripped"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// DefaultDebugRoot is where distributions install separate debug files.
const DefaultDebugRoot = "/usr/lib/debug"

// Options say where to look for separate debug files. The zero value is
// the default.
type Options struct {
	// DebugRoot is the root of the separate debug file tree searched by
	// build-id (DebugRoot/.build-id/xx/rest.debug) and by
	// .gnu_debuglink (DebugRoot/dir/name). "" means DefaultDebugRoot.
	DebugRoot string
	// CacheDir is where decompressed debug sections are kept, so that
	// the next recording reads them instead of inflating them again (see
	// sectionCache). "" means dwarf in memtrail's cache directory (see
	// usercache); "-" keeps none.
	CacheDir string
}

// cacheDir returns the directory of the section cache, or "" for none: a
// directory another user owns or could write to is none.
func (opts Options) cacheDir() string {
	switch opts.CacheDir {
	case "-":
		return ""
	case "":
		dir, err := usercache.Dir("dwarf")
		if err != nil {
			return ""
		}
		return dir
	}
	if usercache.Make(opts.CacheDir) != nil {
		return ""
	}
	return opts.CacheDir
}

// Object symbolizes addresses in one ELF file. Its methods are safe for
// concurrent use, but calls are serialized: symbolize different objects
// in parallel rather than one object from many goroutines.
type Object struct {
	path    string
	status  Status
	message string

	files []*elf.File // the file and its separate debug file, closed by Close

	mu      sync.Mutex
	symbols *symbolTable
	dwarf   *dwarfInfo // nil without usable DWARF
	names   map[string]string
}

// Open opens the ELF file at path with the default [Options].
func Open(path string, buildID []byte) (*Object, error) {
	return Options{}.Open(path, buildID)
}

// Open opens the ELF file at path for symbolization. buildID is the
// build-id the running process had for it, or nil if unknown.
//
// A file that cannot be opened or parsed is an error (wrapping the cause,
// so errors.Is(err, fs.ErrNotExist) works). A file whose build-id differs
// from buildID is not: its Object's Status is Mismatch.
func (opts Options) Open(path string, buildID []byte) (*Object, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening ELF file: %w", err)
	}
	o := &Object{path: path, files: []*elf.File{f}, names: map[string]string{}}

	fileID := BuildID(f)
	if buildID != nil && !bytes.Equal(fileID, buildID) {
		o.status = Mismatch
		o.message = fmt.Sprintf("%s has build-id %x but the process had %x: it changed since the recording", path, fileID, buildID)
		return o, nil
	}

	// The DWARF comes from the file itself or from a separate debug file;
	// the symbols from both, since a stripped file keeps only .dynsym and
	// its debug file has the full .symtab.
	dwarfFile, dwarfPath := f, path
	if !hasDWARF(f) {
		if df, dpath := opts.findDebugFile(path, f, fileID); df != nil {
			o.files = append(o.files, df)
			dwarfFile, dwarfPath = df, dpath
		}
	}
	o.symbols = readSymbols(o.files)

	var dwarfErr error
	if hasDWARF(dwarfFile) {
		var alt *altDWARF
		if af, altPath := opts.findAltFile(dwarfPath, dwarfFile); af != nil {
			o.files = append(o.files, af)
			alt, _ = loadAltDWARF(af, altPath, opts.cacheDir()) // without it, only some names are lost
		}
		o.dwarf, dwarfErr = loadDWARF(dwarfFile, dwarfPath, alt, opts.cacheDir())
	}
	switch {
	case o.dwarf != nil && o.dwarf.split > 0:
		// The .dwo files are not read: lines come from the program, names
		// from its symbols, and inlined functions are not known.
		o.status = Full
		o.message = fmt.Sprintf("debug info from %s, without the .dwo files of its %d split units (no inlined functions)", dwarfPath, o.dwarf.split)
	case o.dwarf != nil:
		o.status = Full
		o.message = "debug info from " + dwarfPath
	case dwarfErr != nil && o.symbols.len() > 0:
		o.status = NoDebug
		o.message = fmt.Sprintf("unreadable debug info in %s (%v); names from the ELF symbol table", dwarfPath, dwarfErr)
	case o.symbols.len() > 0:
		o.status = NoDebug
		o.message = "no debug info (install the -dbgsym package or build with -g)"
	default:
		o.status = Stripped
		o.message = "no symbols and no debug info (stripped; install the -dbgsym package or build with -g)"
	}
	return o, nil
}

// Status reports how much o can tell, with a message for people.
func (o *Object) Status() (Status, string) {
	return o.status, o.message
}

// Frames returns the source frames at addr, a link-time virtual address
// inside an instruction (for a return address, pass the address minus 1
// so that it falls inside the call). Frames are innermost first: the
// functions inlined at addr, then the function that holds its code. It
// returns nil if nothing is known about addr.
func (o *Object) Frames(addr uint64) []Frame {
	if o.status == Mismatch {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dwarf != nil {
		if frames := o.dwarf.frames(addr, o.symbol); frames != nil {
			return frames
		}
	}
	if name, _, _ := o.symbol(addr); name != "" {
		return []Frame{{Function: name}}
	}
	return nil
}

// symbol returns the demangled name and the start of the ELF symbol
// holding addr, and whether its name was mangled; or "", 0, false.
func (o *Object) symbol(addr uint64) (name string, start uint64, mangled bool) {
	raw, start := o.symbols.lookup(addr)
	if raw == "" {
		return "", 0, false
	}
	name, ok := o.names[raw]
	if !ok {
		name = demangleName(raw)
		o.names[raw] = name
	}
	return name, start, name != raw
}

// Close releases the files o holds.
func (o *Object) Close() error {
	var errs []error
	for _, f := range o.files {
		errs = append(errs, f.Close())
	}
	o.files = nil
	return errors.Join(errs...)
}

// readSymbols indexes the function symbols of files: their .symtab and
// .dynsym. A file without a table is no error.
func readSymbols(files []*elf.File) *symbolTable {
	var tables []symbolSource
	for i, f := range files {
		if syms, err := f.Symbols(); err == nil {
			tables = append(tables, symbolSource{f.Sections, syms})
		}
		if i > 0 {
			continue // a debug file's .dynsym is a copy of the file's
		}
		if syms, err := f.DynamicSymbols(); err == nil {
			tables = append(tables, symbolSource{f.Sections, syms})
		}
	}
	return newSymbolTable(tables)
}

// hasDWARF reports whether f carries DWARF debug info.
func hasDWARF(f *elf.File) bool {
	for _, name := range []string{".debug_info", ".zdebug_info"} {
		if s := f.Section(name); s != nil && s.Type != elf.SHT_NOBITS && s.Size > 0 {
			return true
		}
	}
	return false
}

// loadDWARF reads f's DWARF and indexes its compilation units. path is
// where f was opened; alt is the supplementary file f refers to, or nil;
// cache is the directory of the section cache ("" for none).
func loadDWARF(f *elf.File, path string, alt *altDWARF, cache string) (*dwarfInfo, error) {
	raw, err := readDWARF(f, path, cache)
	if err != nil {
		return nil, err
	}
	return newDwarfInfo(raw, alt)
}

// loadAltDWARF reads a supplementary debug file, opened at path.
func loadAltDWARF(f *elf.File, path, cache string) (*altDWARF, error) {
	raw, err := readDWARF(f, path, cache)
	if err != nil {
		return nil, err
	}
	return &altDWARF{data: raw.data, reader: raw.data.Reader(), str: raw.lines.str}, nil
}

// dwarfSections are the sections readDWARF reads; aranges is optional
// (units' own ranges are the fallback).
var dwarfSections = []string{"abbrev", "info", "line", "ranges", "str", "line_str", "rnglists", "addr", "str_offsets", "aranges"}

// readDWARF is elf.File.DWARF without the sections symbolization does not
// use: location lists, call frames, type units, which are as large as the
// rest together and are compressed in debug files. It also returns the
// raw .debug_info and .debug_abbrev. Relocatable objects are not loaded by
// processes; they go to elf.File.DWARF, which applies their relocations.
//
// The sections are read and decompressed at once, each on a goroutine:
// the debug files of distributions compress them, and decompressing
// glibc's alone takes a tenth of a second, which every recording of a
// program that runs through libc's startup code pays at its end. The
// decompressed sections go to the section cache in cache, if not "".
func readDWARF(f *elf.File, path, cache string) (rawDWARF, error) {
	raw := rawDWARF{order: f.ByteOrder}
	var file io.ReaderAt
	if osf, err := os.Open(path); err == nil {
		defer osf.Close()
		file = osf
	}
	sc := newSectionCache(cache, f)
	data := make([][]byte, len(dwarfSections))
	errs := make([]error, len(dwarfSections))
	var wg sync.WaitGroup
	for i, name := range dwarfSections {
		wg.Go(func() { data[i], errs[i] = sc.section(f, file, name) })
	}
	wg.Wait()
	sections := map[string][]byte{}
	for i, name := range dwarfSections {
		switch {
		case errs[i] == nil:
			sections[name] = data[i]
		case name != "aranges":
			return raw, fmt.Errorf("reading .debug_%s: %w", name, errs[i])
		}
	}
	raw.info, raw.abbrev, raw.aranges = sections["info"], sections["abbrev"], sections["aranges"]
	raw.lines = lineSections{line: sections["line"], lineStr: sections["line_str"], str: sections["str"], order: f.ByteOrder}
	if f.Type == elf.ET_REL {
		d, err := f.DWARF()
		raw.data = d
		return raw, err
	}
	d, err := dwarf.New(sections["abbrev"], nil, nil, sections["info"], sections["line"], nil, sections["ranges"], sections["str"])
	if err != nil {
		return raw, err
	}
	for _, name := range []string{"line_str", "rnglists", "addr", "str_offsets"} {
		if sections[name] == nil {
			continue
		}
		if err := d.AddSection(".debug_"+name, sections[name]); err != nil {
			return raw, err
		}
	}
	raw.data = d
	return raw, nil
}

// debugSection returns the contents of .debug_name, decompressed. It may
// be compressed the standard way (SHF_COMPRESSED) or the older GNU way: a
// .zdebug_name section holding "ZLIB", the size as a big-endian uint64,
// then a zlib stream. file, if not nil, is f's file: a zlib section of a
// 64-bit file is then read from it and inflated by klauspost/compress,
// which takes a quarter less time than debug/elf's compress/zlib.
func debugSection(f *elf.File, file io.ReaderAt, name string) ([]byte, error) {
	if s := f.Section(".debug_" + name); s != nil && s.Type != elf.SHT_NOBITS {
		if s.Flags&elf.SHF_COMPRESSED != 0 && file != nil && f.Class == elf.ELFCLASS64 {
			if data, ok := inflateSection(s, file, f.ByteOrder); ok {
				return data, nil
			}
		}
		return s.Data()
	}
	s := f.Section(".zdebug_" + name)
	if s == nil || s.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	data, err := s.Data()
	if err != nil {
		return nil, err
	}
	if len(data) < 12 || string(data[:4]) != "ZLIB" {
		return data, nil
	}
	return inflate(data[12:], binary.BigEndian.Uint64(data[4:12]))
}

// inflateSection decompresses an SHF_COMPRESSED section of a 64-bit file
// holding a zlib stream: a compression header (type, reserved, size,
// alignment) before it. It reports false for anything else, which
// debug/elf is left to read.
func inflateSection(s *elf.Section, file io.ReaderAt, order binary.ByteOrder) ([]byte, bool) {
	const chdrSize = 24
	if s.FileSize < chdrSize || s.FileSize > 1<<32 {
		return nil, false
	}
	stored := make([]byte, s.FileSize)
	if _, err := file.ReadAt(stored, int64(s.Offset)); err != nil {
		return nil, false
	}
	if elf.CompressionType(order.Uint32(stored)) != elf.COMPRESS_ZLIB {
		return nil, false
	}
	data, err := inflate(stored[chdrSize:], order.Uint64(stored[8:]))
	if err != nil || uint64(len(data)) != order.Uint64(stored[8:]) {
		return nil, false
	}
	return data, true
}

// inflate decompresses a zlib stream that says it holds size bytes.
func inflate(stream []byte, size uint64) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(stream))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	var out bytes.Buffer
	out.Grow(int(min(size, 1<<30))) // the size is a hint, not to be trusted with all memory
	if _, err := io.Copy(&out, io.LimitReader(zr, int64(min(size, 1<<62)))); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// demangleName returns the readable form of a C++ (or Rust) symbol name,
// and other names as they are.
func demangleName(name string) string {
	return demangle.Filter(name)
}
