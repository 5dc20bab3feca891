package analysis

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"syscall"

	"github.com/klauspost/compress/zstd"

	"github.com/memtrail/memtrail/internal/trace"
	"github.com/memtrail/memtrail/internal/usercache"
)

// The analysis of a trace is kept beside it, so that a second look at the
// same trace (the same report again, another view of it) takes no replay.
// The cache file, TRACE.cache, holds the models of the latest few sets of
// Options; it is valid while the trace is the same file unchanged: the
// same size, modification time and SHA-256 of all its bytes (hashing them
// costs little next to decoding them: see docs/performance.md). When the
// trace's directory cannot be written, the cache goes to memtrail's cache
// directory instead (see usercache), named after the trace's absolute
// path.
//
// A cache decides what check says of a trace, so one is only read if it
// is a regular file that no one but its owner can write, owned by the
// user memtrail runs as or by the trace's owner (who could as well have
// written the trace). Caches are written 0600: they hold what the trace
// holds.

// cacheVersion changes whenever the model or its encoding changes, so
// that caches written by other versions are ignored.
const cacheVersion = 17

// maxCacheBytes bounds the cache file read: far more than the models of
// the largest traces take.
const maxCacheBytes = 4 << 30

// cacheMagic starts every cache file.
const cacheMagic = "memtrail analysis cache\n"

// cacheEntries is how many analyses a cache file keeps: the latest.
const cacheEntries = 8

// AnalyzeFile analyzes the trace at path with opts, reading the model from
// the trace's cache if it holds it, and writing it there if not. A cache
// that cannot be read or written is no error: the trace is analyzed.
// fromCache says whether the model came from the cache.
func AnalyzeFile(path string, opts Options) (m *Model, fromCache bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	id, owner, err := identify(f)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	paths := cachePaths(path)
	c := &traceCache{trace: f, path: path, file: cacheFile{Trace: id, Entries: readCache(paths, id, owner)}}
	if !opts.Filter.IsZero() && opts.Stacks == nil {
		// The filter reads the stacks and symbols of an unfiltered
		// analysis: most often in the cache already.
		if opts.Stacks, _, err = c.analyze(Options{Objects: -1}); err != nil {
			return nil, false, err
		}
	}
	if opts.To != 0 && opts.Stacks == nil {
		if m := c.cached(opts); m != nil {
			return m, true, nil
		}
		// A window stops reading at its end when an analysis of the
		// whole trace is at hand to take the rest from.
		opts.Stacks = c.cached(Options{})
	}
	m, fromCache, err = c.analyze(opts)
	if err == nil && c.changed {
		writeCache(paths, c.file)
	}
	return m, fromCache, err
}

// traceCache is an open trace and its cache.
type traceCache struct {
	trace   *os.File
	path    string
	file    cacheFile
	changed bool // file has entries the cache on disk does not
}

// cached returns the model of the trace with opts if the cache holds it,
// else nil.
func (c *traceCache) cached(opts Options) *Model {
	key := optionsKey(opts)
	for _, e := range c.file.Entries {
		if e.Key == key {
			if m, err := decodeModel(e.Model); err == nil {
				return m
			}
		}
	}
	return nil
}

// analyze returns the model of the trace with opts, from the cache if it
// holds it, else by analyzing the trace and adding the model to the cache.
func (c *traceCache) analyze(opts Options) (*Model, bool, error) {
	if m := c.cached(opts); m != nil {
		return m, true, nil
	}
	key := optionsKey(opts)
	r, err := trace.NewReader(bufio.NewReaderSize(withProgress(c.trace, opts.Progress), 1<<20))
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", c.path, err)
	}
	m, err := Analyze(r, opts)
	if opts.Progress != nil {
		opts.Progress(1, 1) // done, whatever is left after the end record
	}
	if err != nil {
		return nil, false, err
	}
	if encoded, err := encodeModel(m); err == nil {
		c.file.Entries = append(c.file.Entries, cacheEntry{Key: key, Model: encoded})
		if len(c.file.Entries) > cacheEntries {
			c.file.Entries = c.file.Entries[len(c.file.Entries)-cacheEntries:]
		}
		c.changed = true
	}
	return m, false, nil
}

// traceID tells a trace file from any other, and from itself changed.
type traceID struct {
	Size    int64
	ModTime int64    // ns since the epoch
	Sum     [32]byte // SHA-256 of the whole file
}

// identify returns the ID of the open trace f, and its owner's uid.
func identify(f *os.File) (id traceID, owner int, err error) {
	fi, err := f.Stat()
	if err != nil {
		return traceID{}, 0, err
	}
	id = traceID{Size: fi.Size(), ModTime: fi.ModTime().UnixNano()}
	owner = os.Geteuid()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		owner = int(st.Uid)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, fi.Size())); err != nil {
		return traceID{}, 0, err
	}
	copy(id.Sum[:], h.Sum(nil))
	return id, owner, nil
}

// optionsKey names a set of options in a cache.
func optionsKey(o Options) string {
	return fmt.Sprintf("from=%d to=%d threads=%v objects=%d filter=%q heapmap=%d inherited=%t", o.From, o.To, o.Threads, o.objects(),
		filterExprs(o.Filter), o.HeapMap, !o.LeaveOutInherited)
}

// cachePaths returns where the cache of the trace at path may be: beside
// it, then in the user's cache directory.
func cachePaths(path string) []string {
	paths := []string{path + ".cache"}
	abs, err1 := filepath.Abs(path)
	dir, err2 := usercache.Dir("analysis")
	if err1 == nil && err2 == nil {
		sum := sha256.Sum256([]byte(abs))
		paths = append(paths, filepath.Join(dir, fmt.Sprintf("%x.cache", sum[:12])))
	}
	return paths
}

type cacheFile struct {
	Trace   traceID
	Entries []cacheEntry
}

// cacheEntry is one model of a cache, encoded on its own so that looking
// one up decodes it alone.
type cacheEntry struct {
	Key   string
	Model []byte // a cachedModel, in gob, compressed with zstd
}

// readCache returns the entries of the first cache of paths that is about
// trace id and owned by the user or by the trace's owner; none if there
// is none.
func readCache(paths []string, id traceID, owner int) []cacheEntry {
	for _, p := range paths {
		data, err := usercache.ReadFile(p, maxCacheBytes, owner)
		if err != nil {
			continue
		}
		rest, ok := bytes.CutPrefix(data, []byte(cacheMagic))
		if !ok || len(rest) < 1 || rest[0] != cacheVersion {
			continue
		}
		var cf cacheFile
		if gob.NewDecoder(bytes.NewReader(rest[1:])).Decode(&cf) != nil || cf.Trace != id {
			continue
		}
		return cf.Entries
	}
	return nil
}

// writeCache writes cf to the first of paths where it can, replacing what
// was there at once (a reader never sees half a file).
func writeCache(paths []string, cf cacheFile) {
	var buf bytes.Buffer
	buf.WriteString(cacheMagic)
	buf.WriteByte(cacheVersion)
	if gob.NewEncoder(&buf).Encode(cf) != nil {
		return
	}
	for _, p := range paths {
		tmp, err := os.CreateTemp(filepath.Dir(p), filepath.Base(p)+".*") // 0600
		if err != nil {
			continue
		}
		_, err = tmp.Write(buf.Bytes())
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), p)
		}
		if err == nil {
			return
		}
		os.Remove(tmp.Name())
	}
}

// cachedModel is a Model as the cache holds it: the model's own fields,
// and what its unexported parts hold (the stack trees and the symbols)
// spelled out.
type cachedModel struct {
	Model   Model
	Filter  map[string]string // the filter's expressions, by field
	Stacks  []cachedStacks    // one per process, in the order of Model.Processes
	Symbols cachedSymbols
}

// filterExprs returns the expressions of f by field.
func filterExprs(f StackFilter) map[string]string {
	exprs := map[string]string{}
	for _, field := range f.Fields() {
		exprs[field.Name] = field.Expr.String()
	}
	return exprs
}

type cachedStacks struct {
	Nodes   []cachedNode
	Modules map[uint64]uint64
	// SiteTrees holds, for each inherited site (in the order of Sites),
	// the ID of the process whose stack tree its stack is in.
	SiteTrees []uint64
}

type cachedNode struct {
	ID, Parent, Module, Offset uint64
}

type cachedSymbols struct {
	Objects []Object
	Strings map[uint64]string
	Frames  []cachedFrames
	Types   map[uint64]map[uint64][]string
}

type cachedFrames struct {
	Object, Offset uint64
	Frames         []trace.Frame
}

// encodeModel returns m as a cache entry holds it. The entry is
// compressed: a model's gob repeats field names, small numbers and the
// frames of its stacks, and it was several times the size of the trace
// it came from, which is itself compressed.
func encodeModel(m *Model) ([]byte, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(cachedModelOf(m)); err != nil {
		return nil, err
	}
	return cacheEncoder().EncodeAll(buf.Bytes(), nil), nil
}

// decodeModel returns the model a cache entry holds.
func decodeModel(data []byte) (*Model, error) {
	raw, err := cacheDecoder().DecodeAll(data, nil)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	var c cachedModel
	if err := gob.NewDecoder(bytes.NewReader(raw)).Decode(&c); err != nil {
		return nil, err
	}
	return c.model()
}

var (
	cacheEncoder = sync.OnceValue(func() *zstd.Encoder {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBetterCompression), zstd.WithEncoderConcurrency(1))
		if err != nil {
			panic(err) // only bad options fail, and these are constant
		}
		return enc
	})
	// The decoder bounds what one entry may inflate to as the file
	// read is bounded: a damaged or hostile cache cannot take more.
	cacheDecoder = sync.OnceValue(func() *zstd.Decoder {
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxCacheBytes))
		if err != nil {
			panic(err)
		}
		return dec
	})
)

func cachedModelOf(m *Model) *cachedModel {
	c := &cachedModel{Model: *m, Filter: filterExprs(m.filter)}
	var syms *symbols
	for _, p := range m.Processes {
		cs := cachedStacks{}
		if p.stacks != nil {
			syms = p.stacks.syms
			cs.Modules = p.stacks.modules
			for id, n := range p.stacks.nodes.all {
				cs.Nodes = append(cs.Nodes, cachedNode{ID: id, Parent: n.parent, Module: n.module, Offset: n.offset})
			}
			slices.SortFunc(cs.Nodes, func(a, b cachedNode) int { return cmpUint(a.ID, b.ID) })
		}
		for _, s := range p.Sites {
			if s.Inherited {
				var owner uint64
				if s.tree != nil {
					owner = s.tree.owner
				}
				cs.SiteTrees = append(cs.SiteTrees, owner)
			}
		}
		c.Stacks = append(c.Stacks, cs)
	}
	if syms != nil {
		c.Symbols.Strings, c.Symbols.Types = syms.strings, syms.types
		for _, o := range syms.objects {
			c.Symbols.Objects = append(c.Symbols.Objects, *o)
		}
		slices.SortFunc(c.Symbols.Objects, func(a, b Object) int { return cmpUint(a.ID, b.ID) })
		for at, frames := range syms.frames {
			c.Symbols.Frames = append(c.Symbols.Frames, cachedFrames{Object: at.object, Offset: at.offset, Frames: frames})
		}
		// In order, as the objects: the same model makes the same cache.
		slices.SortFunc(c.Symbols.Frames, func(a, b cachedFrames) int {
			return cmp.Or(cmpUint(a.Object, b.Object), cmpUint(a.Offset, b.Offset))
		})
	}
	return c
}

// model rebuilds the Model.
func (c *cachedModel) model() (*Model, error) {
	m := c.Model
	if len(c.Stacks) != len(m.Processes) {
		return nil, errors.New("cache: processes and stack trees differ")
	}
	for name, expr := range c.Filter {
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("cache: filter: %w", err)
		}
		field := m.filter.field(name)
		if field == nil {
			return nil, fmt.Errorf("cache: filter: no field %q", name)
		}
		*field = re
	}
	syms := newSymbols()
	for i := range c.Symbols.Objects {
		o := c.Symbols.Objects[i]
		syms.objects[o.ID] = &o
	}
	if c.Symbols.Strings != nil {
		syms.strings = c.Symbols.Strings
	}
	if c.Symbols.Types != nil {
		syms.types = c.Symbols.Types
	}
	for _, f := range c.Symbols.Frames {
		syms.frames[codeAddr{f.Object, f.Offset}] = f.Frames
	}
	trees := make(map[uint64]*stackTree)
	for i, p := range m.Processes {
		t := newStackTree(syms, p.ID)
		for _, n := range c.Stacks[i].Nodes {
			t.nodes.set(n.ID, stackNode{parent: n.Parent, module: n.Module, offset: n.Offset})
		}
		for k, v := range c.Stacks[i].Modules {
			t.modules[k] = v
		}
		p.stacks = t
		trees[p.ID] = t
	}
	for i, p := range m.Processes {
		owners := c.Stacks[i].SiteTrees
		for j := range p.Sites {
			s := &p.Sites[j]
			if !s.Inherited {
				continue
			}
			if len(owners) == 0 {
				return nil, errors.New("cache: an inherited site without its tree")
			}
			s.tree, owners = trees[owners[0]], owners[1:]
		}
	}
	return &m, nil
}
