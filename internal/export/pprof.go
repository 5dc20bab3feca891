package export

import (
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/google/pprof/profile"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace"
)

// InUse says which moment of a process the inuse samples of a pprof
// profile count the live blocks of.
type InUse struct {
	name string
	of   func(s *analysis.Site) (blocks, bytes uint64)
}

// InUseAtExit counts the blocks still live when the process ended (at the
// end of the analysis's window).
func InUseAtExit() InUse {
	return InUse{"at exit", func(s *analysis.Site) (uint64, uint64) { return s.InUseAtExitBlocks, s.InUseAtExitBytes }}
}

// InUseAtPeak counts the blocks live at the process's peak.
func InUseAtPeak() InUse {
	return InUse{"at the peak", func(s *analysis.Site) (uint64, uint64) { return s.PeakBlocks, s.PeakBytes }}
}

// InUseAt counts the blocks live at time t after the start of the
// process; moment is the same process analyzed at that moment (with
// analysis.Options From and To both t), whose sites have the same stack
// IDs as those of the process exported.
func InUseAt(t time.Duration, moment *analysis.Process) InUse {
	type key struct {
		stack     uint64
		inherited bool
	}
	live := make(map[key]*analysis.Site)
	for _, s := range moment.SiteList() {
		live[key{s.Stack, s.Inherited}] = s
	}
	return InUse{"at " + t.String(), func(s *analysis.Site) (uint64, uint64) {
		if m := live[key{s.Stack, s.Inherited}]; m != nil {
			return m.InUseAtExitBlocks, m.InUseAtExitBytes
		}
		return 0, 0
	}}
}

// PProf writes the sites of process p as a gzipped pprof profile with the
// sample types of Go's heap profiles: alloc_objects and alloc_space count
// every allocation, inuse_objects and inuse_space the blocks live at the
// moment inUse says. The profile is symbolized: its locations carry the
// functions, files and lines of the trace, inlined frames included, so that
// pprof needs none of the program's files.
//
// Mappings are one per object file. The trace knows code addresses only as
// offsets in their object (processes load them at different places), so
// the mappings are laid out one after the other in an address space of the
// profile's own: a location's address is its mapping's start plus the
// offset of its call instruction in the object.
func PProf(w io.Writer, info *trace.Info, p *analysis.Process, inUse InUse) error {
	b := newProfileBuilder(p)
	b.prof.Comments = []string{
		fmt.Sprintf("memtrail: %s (pid %d)", commandLine(p), p.PID),
		"inuse_objects and inuse_space: the blocks live " + inUse.name,
	}
	if info != nil {
		b.prof.TimeNanos = info.StartUnixNano + int64(p.Start)
	}
	b.prof.DurationNanos = int64(p.RunTime())
	for _, s := range p.SiteList() {
		inUseBlocks, inUseBytes := inUse.of(s)
		if s.Allocations == 0 && inUseBlocks == 0 && inUseBytes == 0 {
			continue
		}
		b.prof.Sample = append(b.prof.Sample, &profile.Sample{
			Location: b.locations(p.SiteStack(s)),
			Value:    []int64{int64(s.Allocations), int64(s.BytesAllocated), int64(inUseBlocks), int64(inUseBytes)},
		})
	}
	b.setMappingFlags()
	if err := b.prof.CheckValid(); err != nil {
		return fmt.Errorf("making the pprof profile: %w", err)
	}
	return b.prof.Write(w)
}

// profileBuilder makes the locations, functions and mappings of a profile,
// each once.
type profileBuilder struct {
	prof          *profile.Profile
	mappings      map[string]*profile.Mapping // by object path
	locationByKey map[locationKey]*profile.Location
	functions     map[functionKey]*profile.Function
	// nextStart is where the next mapping starts in the profile's
	// address space.
	nextStart uint64
	// symbolized says, of each mapping, whether every location in it has
	// a function, and every line a file and a line number.
	symbolized map[*profile.Mapping]*mappingSymbols
}

type locationKey struct {
	object  string
	address uint64
	// function tells apart frames without an object (a stack damaged
	// in the trace, or none at all).
	function string
}

type functionKey struct{ name, file string }

// mappingSymbols is what the locations of a mapping have: used says that
// it has any.
type mappingSymbols struct{ used, functions, files, lines bool }

// mappingSpan is the room each mapping gets in the profile's address
// space: more than any object's code.
const mappingSpan = 1 << 40

func newProfileBuilder(p *analysis.Process) *profileBuilder {
	b := &profileBuilder{
		prof: &profile.Profile{
			SampleType: []*profile.ValueType{
				{Type: "alloc_objects", Unit: "count"},
				{Type: "alloc_space", Unit: "bytes"},
				{Type: "inuse_objects", Unit: "count"},
				{Type: "inuse_space", Unit: "bytes"},
			},
			DefaultSampleType: "inuse_space",
			// Every allocation is in the profile: none is sampled.
			PeriodType: &profile.ValueType{Type: "space", Unit: "bytes"},
			Period:     1,
		},
		mappings:      make(map[string]*profile.Mapping),
		locationByKey: make(map[locationKey]*profile.Location),
		functions:     make(map[functionKey]*profile.Function),
		nextStart:     mappingSpan,
		symbolized:    make(map[*profile.Mapping]*mappingSymbols),
	}
	// pprof takes the first mapping for the program's: make it so.
	objects := p.Objects()
	for _, o := range objects {
		if o.Path == p.Exe {
			b.mapping(o)
		}
	}
	for _, o := range objects {
		b.mapping(o)
	}
	return b
}

// mapping returns the mapping of object o, making it if needed.
func (b *profileBuilder) mapping(o *analysis.Object) *profile.Mapping {
	if m, ok := b.mappings[o.Path]; ok {
		return m
	}
	m := &profile.Mapping{
		ID:      uint64(len(b.prof.Mapping) + 1),
		Start:   b.nextStart,
		Limit:   b.nextStart + mappingSpan,
		File:    o.Path,
		BuildID: hex.EncodeToString(o.BuildID),
	}
	b.nextStart += mappingSpan
	b.prof.Mapping = append(b.prof.Mapping, m)
	b.mappings[o.Path] = m
	b.symbolized[m] = &mappingSymbols{functions: true, files: true, lines: true}
	return m
}

// locations returns the locations of a call stack's frames (innermost
// first, as pprof wants them): one per code address, whose lines are the
// functions inlined there, innermost first, and the function the address
// is in.
func (b *profileBuilder) locations(frames []analysis.Frame) []*profile.Location {
	if len(frames) == 0 {
		return []*profile.Location{b.location([]analysis.Frame{{Function: noStackName}})}
	}
	var locs []*profile.Location
	for len(frames) > 0 {
		n := 1
		for n < len(frames) && frames[n-1].Inlined {
			n++
		}
		locs = append(locs, b.location(frames[:n]))
		frames = frames[n:]
	}
	return locs
}

// location returns the location of the frames of one code address.
func (b *profileBuilder) location(frames []analysis.Frame) *profile.Location {
	last := frames[len(frames)-1]
	key := locationKey{object: last.Object, address: last.Address}
	if last.Object == "" {
		key.function = last.Name()
	}
	if loc, ok := b.locationByKey[key]; ok {
		return loc
	}
	loc := &profile.Location{ID: uint64(len(b.prof.Location) + 1)}
	var syms *mappingSymbols
	if last.Object != "" {
		loc.Mapping = b.mapping(&analysis.Object{Path: last.Object})
		// The frame's address is the return address: the call is the
		// byte before.
		loc.Address = loc.Mapping.Start + max(last.Address, 1) - 1
		syms = b.symbolized[loc.Mapping]
	}
	for _, f := range frames {
		loc.Line = append(loc.Line, profile.Line{Function: b.function(f), Line: int64(f.Line)})
		if syms != nil {
			syms.used = true
			syms.functions = syms.functions && f.Function != ""
			syms.files = syms.files && f.File != ""
			syms.lines = syms.lines && f.Line != 0
		}
	}
	b.prof.Location = append(b.prof.Location, loc)
	b.locationByKey[key] = loc
	return loc
}

// function returns the function of frame f. A frame whose function is
// unknown gets a function named after where its code is, which says more
// in pprof's views than an address.
func (b *profileBuilder) function(f analysis.Frame) *profile.Function {
	key := functionKey{f.Name(), f.File}
	if fn, ok := b.functions[key]; ok {
		return fn
	}
	fn := &profile.Function{
		ID:   uint64(len(b.prof.Function) + 1),
		Name: key.name,
		// The trace keeps the demangled names alone.
		SystemName: key.name,
		Filename:   f.File,
	}
	b.prof.Function = append(b.prof.Function, fn)
	b.functions[key] = fn
	return fn
}

// setMappingFlags says of each mapping how well its locations are
// symbolized: pprof symbolizes again only those that say nothing.
// Inlined frames come with files and lines, from DWARF.
func (b *profileBuilder) setMappingFlags() {
	for m, s := range b.symbolized {
		if !s.used {
			continue
		}
		m.HasFunctions = s.functions
		m.HasFilenames = s.functions && s.files
		m.HasLineNumbers = s.functions && s.lines
		m.HasInlineFrames = s.functions && s.files && s.lines
	}
}
