package symbolize

import (
	"bytes"
	"debug/dwarf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"sort"
)

// lineTable is one compilation unit's line number program, decoded once
// into rows and indexed by address.
type lineTable struct {
	files []string  // by DWARF file number (as used by DW_AT_call_file too)
	rows  []lineRow // the rows of all sequences, each sequence contiguous
	seqs  spanIndex // address range -> index into seqStart
	// seqStart[i] is the first row of sequence i; its last row is the one
	// before seqStart[i+1].
	seqStart []int
}

// A lineRow says that the code from addr up to the next row's addr comes
// from file:line.
//
// noFile is the file number of rows whose file number is out of range.
type lineRow struct {
	addr uint64
	file uint32
	line uint32
}

const noFile = math.MaxUint32

// readLineTable decodes the line table of compilation unit cu.
// compDir completes relative file names; sections are for reading DWARF 5
// file names. It returns nil if cu has no line table.
//
// Rows with the same address are collapsed into the last one, as binutils
// does: compilers emit several when code of one line is empty (a
// function's opening brace, an inlined call site), and the last one is the
// line whose code actually starts there.
func readLineTable(d *dwarf.Data, sections lineSections, cu *dwarf.Entry, compDir string) (*lineTable, error) {
	lr, err := d.LineReader(cu)
	if err != nil {
		return nil, fmt.Errorf("reading line table header: %w", err)
	}
	if lr == nil {
		return nil, nil
	}
	t := &lineTable{}
	fileNumbers := map[*dwarf.LineFile]uint32{}
	numberFiles := func() {
		for i, f := range lr.Files() {
			if f != nil {
				fileNumbers[f] = uint32(i)
			}
		}
	}
	numberFiles()

	var spans []span
	var entry dwarf.LineEntry
	seqBegin := -1
	for {
		err := lr.Next(&entry)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading line table: %w", err)
		}
		if seqBegin < 0 {
			seqBegin = len(t.rows)
		}
		if entry.EndSequence {
			if n := len(t.rows) - seqBegin; n > 0 {
				spans = append(spans, span{lo: t.rows[seqBegin].addr, hi: entry.Address, id: int32(len(t.seqStart))})
				t.seqStart = append(t.seqStart, seqBegin)
			} else {
				t.rows = t.rows[:seqBegin]
			}
			seqBegin = -1
			continue
		}
		file, ok := fileNumbers[entry.File]
		if !ok && entry.File != nil {
			numberFiles() // a DW_LNE_define_file added one
			file, ok = fileNumbers[entry.File]
		}
		if !ok {
			file = noFile
		}
		row := lineRow{addr: entry.Address, file: file, line: uint32(entry.Line)}
		if n := len(t.rows); n > seqBegin && t.rows[n-1].addr == row.addr {
			t.rows[n-1] = row
			continue
		}
		t.rows = append(t.rows, row)
	}
	if seqBegin >= 0 {
		// The last sequence lacks its end marker: drop it rather than
		// guess where it ends.
		t.rows = t.rows[:seqBegin]
	}
	t.seqStart = append(t.seqStart, len(t.rows))
	t.seqs = newSpanIndex(spans)

	// DWARF 4 file numbers start at 1, and debug/dwarf joins file names to
	// their directory and the compilation directory correctly. DWARF 5
	// file numbers start at 0, and debug/dwarf joins names that are
	// already absolute (as clang writes them) to their directory, and
	// relative directories to nothing: read those names again.
	files := lr.Files()
	var names []string
	if len(files) > 0 && files[0] != nil {
		off, _ := cu.Val(dwarf.AttrStmtList).(int64)
		names, _ = sections.dwarf5FileNames(uint64(off))
	}
	for i, f := range files {
		name := ""
		switch {
		case len(names) == len(files):
			name = names[i]
		case f != nil:
			name = f.Name
			if name != "" && !path.IsAbs(name) && compDir != "" {
				name = path.Join(compDir, name)
			}
		}
		if name != "" {
			name = path.Clean(name)
		}
		t.files = append(t.files, name)
	}
	return t, nil
}

// lineSections are the raw sections that DWARF 5 line table headers refer
// to.
type lineSections struct {
	line, lineStr, str []byte
	order              binary.ByteOrder
}

// DWARF 5 line number header content types.
const (
	lnctPath           = 1
	lnctDirectoryIndex = 2
)

// dwarf5FileNames reads the file name table of the DWARF 5 line table at
// off in .debug_line and returns each file's name joined to its
// directory: directory 0 is the compilation directory, and the others
// are relative to it unless absolute.
func (sec lineSections) dwarf5FileNames(off uint64) ([]string, error) {
	b := &scanBuf{data: sec.line, pos: off, order: sec.order}
	h := unitHeader{version: 5, offsetSize: 4}
	if length := b.u32(); length == 0xffffffff {
		h.offsetSize = 8
		b.u64()
	}
	if b.u16() != 5 {
		return nil, errors.New("not a DWARF 5 line table")
	}
	h.addrSize = int(b.u8())
	b.skip(1) // segment selector size
	b.offset(h.offsetSize)
	b.skip(4) // minimum instruction length, maximum operations per instruction, default is_stmt, line_base
	b.skip(1) // line_range
	b.skip(uint64(b.u8()) - 1)

	dirs, err := sec.entries(b, &h)
	if err != nil {
		return nil, err
	}
	files, err := sec.entries(b, &h)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(files))
	for i, f := range files {
		if f.dir >= uint64(len(dirs)) {
			return nil, errors.New("directory index out of range")
		}
		dir := dirs[f.dir].path
		if f.dir > 0 && !path.IsAbs(dir) {
			dir = path.Join(dirs[0].path, dir)
		}
		names[i] = f.path
		if !path.IsAbs(f.path) {
			names[i] = path.Join(dir, f.path)
		}
	}
	return names, nil
}

// A lineEntry is a directory or file of a DWARF 5 line table header.
type lineEntry struct {
	path string
	dir  uint64
}

// entries reads a DWARF 5 directory or file name table: a format (pairs
// of content type and form), then the entries in that format.
func (sec lineSections) entries(b *scanBuf, h *unitHeader) ([]lineEntry, error) {
	type field struct{ content, form uint64 }
	format := make([]field, b.u8())
	for i := range format {
		format[i] = field{b.uleb(), b.uleb()}
	}
	count := b.uleb()
	if b.err != nil || count > uint64(len(b.data)) {
		return nil, errors.New("bad line table header")
	}
	entries := make([]lineEntry, count)
	for i := range entries {
		for _, f := range format {
			start := b.pos
			switch {
			case f.content == lnctPath && f.form == formString:
				start = b.pos
				b.cstring()
				entries[i].path = string(b.data[start : b.pos-1])
			case f.content == lnctPath && (f.form == formLineStrp || f.form == formStrp):
				table := sec.lineStr
				if f.form == formStrp {
					table = sec.str
				}
				entries[i].path = cString(table, b.offset(h.offsetSize))
			case f.content == lnctDirectoryIndex && f.form == formData1:
				entries[i].dir = uint64(b.u8())
			case f.content == lnctDirectoryIndex && f.form == formData2:
				entries[i].dir = uint64(b.u16())
			case f.content == lnctDirectoryIndex && f.form == formUdata:
				entries[i].dir = b.uleb()
			default:
				if _, err := b.skipValue(f.form, h); err != nil {
					return nil, err
				}
			}
			if b.err != nil {
				return nil, fmt.Errorf("line table header at %#x: %w", start, b.err)
			}
		}
	}
	return entries, nil
}

// cString returns the NUL-terminated string at off in a string section,
// or "".
func cString(section []byte, off uint64) string {
	if off >= uint64(len(section)) {
		return ""
	}
	s := section[off:]
	if end := bytes.IndexByte(s, 0); end >= 0 {
		return string(s[:end])
	}
	return ""
}

// find returns the file and line of the code at addr, or "", 0.
func (t *lineTable) find(addr uint64) (string, int) {
	if t == nil {
		return "", 0
	}
	seq := t.seqs.find(addr)
	if seq < 0 {
		return "", 0
	}
	rows := t.rows[t.seqStart[seq]:t.seqStart[seq+1]]
	i := sort.Search(len(rows), func(i int) bool { return rows[i].addr > addr }) - 1
	if i < 0 {
		return "", 0
	}
	return t.file(int64(rows[i].file)), int(rows[i].line)
}

// file returns the name of file number n, or "".
func (t *lineTable) file(n int64) string {
	if t == nil || n < 0 || n >= int64(len(t.files)) {
		return ""
	}
	return t.files[n]
}
