package symbolize

import (
	"debug/elf"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"

	"github.com/memtrail/memtrail/internal/usercache"
)

// sectionCache keeps the decompressed DWARF sections of debug files that
// compress them, as distributions' debug packages do, in a directory per
// build-id: inflating glibc's takes a tenth of a second of every
// recording, reading them back a few milliseconds. A file is only ever
// written whole (renamed into place), and one whose size is not the
// section's is not used: it is decompressed again and rewritten; nor is
// one that another user owns or could have changed (see usercache).
// Anything that fails leaves the cache out. The cache may be deleted at
// any time.
type sectionCache struct {
	dir string // dir/<section name> holds the section; "" for no cache
}

// newSectionCache returns the cache of f's sections under root, or one
// that keeps nothing if root is "" or f has no build-id to name it by.
func newSectionCache(root string, f *elf.File) sectionCache {
	id := BuildID(f)
	if root == "" || len(id) == 0 {
		return sectionCache{}
	}
	return sectionCache{dir: filepath.Join(root, hex.EncodeToString(id))}
}

// section is debugSection, through the cache for compressed sections.
func (c sectionCache) section(f *elf.File, file io.ReaderAt, name string) ([]byte, error) {
	s := f.Section(".debug_" + name)
	if c.dir == "" || s == nil || s.Type == elf.SHT_NOBITS || s.Flags&elf.SHF_COMPRESSED == 0 {
		return debugSection(f, file, name)
	}
	path := filepath.Join(c.dir, name)
	if data, err := usercache.ReadFile(path, int64(s.Size)); err == nil && uint64(len(data)) == s.Size {
		return data, nil
	}
	data, err := debugSection(f, file, name)
	if err == nil && uint64(len(data)) == s.Size {
		c.store(path, data)
	}
	return data, err
}

// store writes data to path through a temporary file, so that a reader
// never sees part of it.
func (c sectionCache) store(path string, data []byte) {
	if err := usercache.Make(c.dir); err != nil {
		return
	}
	tmp, err := os.CreateTemp(c.dir, ".tmp-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		os.Remove(tmp.Name())
	}
}
