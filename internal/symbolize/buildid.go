package symbolize

import (
	"bytes"
	"debug/elf"
	"io"
)

// ntGNUBuildID is the type of the note that holds a GNU build-id.
const ntGNUBuildID = 3

// BuildID returns the GNU build-id of f (the NT_GNU_BUILD_ID note written
// by the linker's --build-id), or nil if f has none.
//
// It looks in the .note.gnu.build-id section first, then in any note
// section, then in the PT_NOTE segments, so that it also works on files
// whose section headers were stripped.
func BuildID(f *elf.File) []byte {
	if s := f.Section(".note.gnu.build-id"); s != nil {
		if id := buildIDIn(f, s.Open(), s.Addralign); id != nil {
			return id
		}
	}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		if id := buildIDIn(f, s.Open(), s.Addralign); id != nil {
			return id
		}
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		if id := buildIDIn(f, p.Open(), p.Align); id != nil {
			return id
		}
	}
	return nil
}

// buildIDIn scans the notes in r for a GNU build-id. Notes are padded to
// 4 bytes, except in 8-aligned note sections (as used by
// .note.gnu.property), where they are padded to 8.
func buildIDIn(f *elf.File, r io.ReadSeeker, align uint64) []byte {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil
	}
	pad := uint64(4)
	if align == 8 {
		pad = 8
	}
	roundUp := func(n uint64) uint64 { return (n + pad - 1) &^ (pad - 1) }
	order := f.ByteOrder
	for len(data) >= 12 {
		nameSize := uint64(order.Uint32(data[0:]))
		descSize := uint64(order.Uint32(data[4:]))
		noteType := order.Uint32(data[8:])
		data = data[12:]
		nameEnd := roundUp(nameSize)
		descEnd := nameEnd + roundUp(descSize)
		if nameEnd > uint64(len(data)) || nameEnd+descSize > uint64(len(data)) {
			return nil
		}
		name := bytes.TrimRight(data[:nameSize], "\x00")
		if noteType == ntGNUBuildID && string(name) == "GNU" && descSize > 0 {
			return bytes.Clone(data[nameEnd : nameEnd+descSize])
		}
		if descEnd > uint64(len(data)) {
			return nil
		}
		data = data[descEnd:]
	}
	return nil
}
