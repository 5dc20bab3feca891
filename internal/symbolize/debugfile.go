package symbolize

import (
	"bytes"
	"debug/elf"
	"encoding/hex"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// findDebugFile looks for the separate debug file of f (at path, with
// build-id fileID) the way gdb does, and returns it opened, with its path,
// or nil, "". The places tried, in order:
//
//  1. root/.build-id/xx/rest.debug, named after the build-id;
//  2. from the .gnu_debuglink section's name: dir/name, dir/.debug/name
//     and root/dir/name, where dir is the directory of the file (symbolic
//     links resolved).
//
// A candidate is taken only if it has DWARF and belongs to f: same
// build-id when both have one, else the CRC32 that .gnu_debuglink records.
func (opts Options) findDebugFile(path string, f *elf.File, fileID []byte) (*elf.File, string) {
	root := opts.debugRoot()
	type candidate struct {
		path     string
		checkCRC bool
		crc      uint32
	}
	var candidates []candidate
	if len(fileID) >= 2 {
		candidates = append(candidates, candidate{path: buildIDPath(root, fileID)})
	}
	if name, crc, ok := debugLink(f); ok {
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			real = path
		}
		if abs, err := filepath.Abs(real); err == nil {
			real = abs
		}
		dir := filepath.Dir(real)
		for _, p := range []string{
			filepath.Join(dir, name),
			filepath.Join(dir, ".debug", name),
			filepath.Join(root, dir, name),
		} {
			candidates = append(candidates, candidate{path: p, checkCRC: true, crc: crc})
		}
	}

	self, err := os.Stat(path)
	if err != nil {
		return nil, ""
	}
	for _, c := range candidates {
		info, err := os.Stat(c.path)
		if err != nil || os.SameFile(info, self) {
			continue
		}
		df, err := elf.Open(c.path)
		if err != nil {
			continue
		}
		debugID := BuildID(df)
		matches := false
		switch {
		case fileID != nil && debugID != nil:
			matches = bytes.Equal(fileID, debugID)
		case c.checkCRC:
			matches = fileCRC(c.path) == c.crc
		}
		if matches && hasDWARF(df) {
			return df, c.path
		}
		df.Close()
	}
	return nil, ""
}

// debugLink returns the file name and CRC32 of f's .gnu_debuglink
// section: the name, NUL-terminated and padded to 4 bytes, then the CRC.
func debugLink(f *elf.File) (name string, crc uint32, ok bool) {
	s := f.Section(".gnu_debuglink")
	if s == nil {
		return "", 0, false
	}
	data, err := s.Data()
	if err != nil {
		return "", 0, false
	}
	end := bytes.IndexByte(data, 0)
	if end <= 0 {
		return "", 0, false
	}
	crcAt := (end + 4) &^ 3
	if crcAt+4 > len(data) {
		return "", 0, false
	}
	return filepath.Base(string(data[:end])), f.ByteOrder.Uint32(data[crcAt:]), true
}

// fileCRC returns the CRC32 (IEEE, as in .gnu_debuglink) of the file at
// path, or 0 if it cannot be read.
func fileCRC(path string) uint32 {
	file, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer file.Close()
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, file); err != nil {
		return 0
	}
	return h.Sum32()
}

// findAltFile opens the supplementary debug file that the .gnu_debugaltlink
// section of f (found at path) names, as dwz writes for DIEs and strings
// shared by several programs. The section holds the file's name,
// NUL-terminated, then its build-id. The name is absolute, or relative to
// the directory of path; the build-id directory under the debug root is
// tried too. It returns nil, "" if f has no link or the file is not found.
func (opts Options) findAltFile(path string, f *elf.File) (*elf.File, string) {
	s := f.Section(".gnu_debugaltlink")
	if s == nil {
		return nil, ""
	}
	data, err := s.Data()
	if err != nil {
		return nil, ""
	}
	end := bytes.IndexByte(data, 0)
	if end <= 0 {
		return nil, ""
	}
	name, id := string(data[:end]), data[end+1:]
	root := opts.debugRoot()

	var candidates []string
	if filepath.IsAbs(name) {
		candidates = append(candidates, name)
		if rest, ok := strings.CutPrefix(name, DefaultDebugRoot+"/"); ok && root != DefaultDebugRoot {
			candidates = append(candidates, filepath.Join(root, rest))
		}
	} else {
		candidates = append(candidates, filepath.Join(filepath.Dir(path), name))
	}
	if len(id) >= 2 {
		candidates = append(candidates, buildIDPath(root, id))
	}
	for _, c := range candidates {
		af, err := elf.Open(c)
		if err != nil {
			continue
		}
		if bytes.Equal(BuildID(af), id) && hasDWARF(af) {
			return af, c
		}
		af.Close()
	}
	return nil, ""
}

func (opts Options) debugRoot() string {
	if opts.DebugRoot == "" {
		return DefaultDebugRoot
	}
	return opts.DebugRoot
}

// buildIDPath is where a debug file with the given build-id is installed
// under root.
func buildIDPath(root string, id []byte) string {
	return filepath.Join(root, ".build-id", hex.EncodeToString(id[:1]), hex.EncodeToString(id[1:])+".debug")
}
