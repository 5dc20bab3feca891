package analysis

import (
	"bufio"
	"errors"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"unsafe"

	"github.com/memtrail/memtrail/internal/trace"
)

// Checkpoint is the state of the replay of a trace, with no window open,
// between two of its blocks: the analysis of a window that begins after
// it can go on from it (AnalyzeFrom) instead of replaying the trace from
// its start. A window late in a long run is then as quick as an early one.
type Checkpoint struct {
	at trace.Position
	a  *analyzer // never changed: AnalyzeFrom goes on from a copy
}

// Checkpoints replays the trace r, with no window, and returns a
// checkpoint every so many events, at the start of a block, while the
// memory they hold together stays under maxBytes (see heldBytes): when
// the next would go over, every other one goes, and the spacing doubles,
// so that they stay spread over the whole trace. It makes none after
// damage, or once a process has ended: a window of a process that ended
// needs its replay, which its end drops.
func Checkpoints(r *trace.Reader, every uint64, maxBytes uint64) ([]*Checkpoint, error) {
	a := newAnalyzer(Options{From: math.MaxUint64})
	var cps []*Checkpoint
	// events counts the events replayed; a checkpoint is made at the first
	// block start after each multiple of every. The doubled spacing keeps
	// to the same grid: the checkpoints that stay are among those an
	// unbounded run makes.
	var events uint64
	next := every
	for {
		batch, rec, err := r.NextBatch()
		if at, ok := r.BlockStart(); ok && events >= next && a.resumable() {
			// One that does not fit alone is left out, and the others
			// stay: the replay may hold fewer blocks later.
			if cp := (&Checkpoint{at: at, a: a.clone()}); heldBytes([]*Checkpoint{cp}) <= maxBytes {
				for len(cps) > 0 && heldBytes(append(slices.Clip(cps), cp)) > maxBytes {
					cps, every = thin(cps), 2*every
				}
				cps = append(cps, cp)
			}
			next = (events/every + 1) * every
		}
		switch {
		case len(batch) > 0:
			a.events(batch)
			events += uint64(len(batch))
		case err == nil:
			a.record(rec)
		default:
			// The end, damage, or a trace without its end: no more
			// checkpoints.
			return cps, nil
		}
	}
}

// heldBytes returns about how many bytes the checkpoints hold together.
// Their heap tables are copies on write of one another (see
// heapTable.clone): a chunk that the replay did not change between two
// checkpoints is held once, and counted once. The heap tables are most
// of it; of the rest, what grows with the trace is counted.
func heldBytes(cps []*Checkpoint) uint64 {
	counted := make(map[unsafe.Pointer]bool)
	var n uint64
	for _, cp := range cps {
		n += cp.a.heldBytes(counted)
	}
	return n
}

// heldBytes returns about how many bytes a holds that counted does not
// have yet, and adds them to it.
func (a *analyzer) heldBytes(counted map[unsafe.Pointer]bool) uint64 {
	var n uint64
	trees := make(map[*stackTree]bool)
	for _, rp := range a.order {
		n += rp.heap.heldBytes(counted)
		p := rp.proc
		n += uint64(cap(p.Sites))*uint64(unsafe.Sizeof(Site{})) +
			uint64(cap(p.Threads))*uint64(unsafe.Sizeof(ThreadSummary{})) +
			uint64(cap(rp.timeline.tl.Points))*uint64(unsafe.Sizeof(TimelinePoint{})) +
			uint64(cap(rp.freedLonger.objs))*uint64(unsafe.Sizeof(HeapObject{})+8) + // and its keys
			uint64(cap(rp.sites.dense))*4 + uint64(len(rp.sites.sparse))*16
		if t := p.stacks; t != nil && !trees[t] {
			trees[t] = true
			n += uint64(cap(t.nodes.dense))*uint64(unsafe.Sizeof(nodeSlot{})) + uint64(len(t.nodes.sparse))*uint64(unsafe.Sizeof(stackNode{})+8)
		}
	}
	return n
}

// thin returns every other checkpoint of cps: the second, the fourth...
func thin(cps []*Checkpoint) []*Checkpoint {
	kept := cps[:0]
	for i := 1; i < len(cps); i += 2 {
		kept = append(kept, cps[i])
	}
	clear(cps[len(kept):])
	return kept
}

// resumable reports whether the state of a can be a checkpoint: every
// process it has begun is still running.
func (a *analyzer) resumable() bool {
	for _, rp := range a.order {
		if rp.finished {
			return false
		}
	}
	return true
}

// Fits reports whether the window of opts begins after the checkpoint in
// every process it has begun, so that AnalyzeFrom may start there.
func (cp *Checkpoint) Fits(opts Options) bool {
	if !opts.Filter.IsZero() || len(opts.Threads) > 0 || opts.From == 0 {
		return false // the replay before the window depends on them
	}
	for _, rp := range cp.a.order {
		// Its latest event replayed must come before the window.
		if rp.lastTime >= rp.proc.Start+opts.From {
			return false
		}
	}
	return true
}

// Position returns where in the trace the checkpoint is.
func (cp *Checkpoint) Position() trace.Position { return cp.at }

// AnalyzeFrom analyzes the window of opts (see Fits) going on from the
// checkpoint cp with r, a Reader of the same trace made at cp's Position.
// The model is the one Analyze makes.
func AnalyzeFrom(cp *Checkpoint, r *trace.Reader, opts Options) (*Model, error) {
	if !cp.Fits(opts) {
		return nil, errors.New("the window does not begin after the checkpoint")
	}
	return cp.resume(opts).run(r)
}

// resume returns an analyzer with opts that goes on from the checkpoint.
func (cp *Checkpoint) resume(opts Options) *analyzer {
	a := cp.a.clone()
	a.opts = opts
	a.model.filter = opts.Filter
	for _, rp := range a.order {
		rp.opts = &a.opts
		rp.freedLonger = topObjects{n: opts.objects(), by: byAge}
	}
	return a
}

// clone returns a copy of a that shares nothing a replay changes.
func (a *analyzer) clone() *analyzer {
	c := &analyzer{opts: a.opts, syms: a.syms.clone(), procs: make(map[uint64]*replay, len(a.procs))}
	m := *a.model
	m.Warnings = slices.Clone(a.model.Warnings)
	m.Processes = nil
	c.model = &m
	// The stack trees, each once: an inherited site points to its
	// parent's.
	trees := make(map[*stackTree]*stackTree)
	tree := func(t *stackTree) *stackTree {
		if t == nil {
			return nil
		}
		if ct, ok := trees[t]; ok {
			return ct
		}
		ct := &stackTree{owner: t.owner, nodes: t.nodes.clone(), modules: maps.Clone(t.modules), syms: c.syms}
		trees[t] = ct
		return ct
	}
	for _, rp := range a.order {
		crp := rp.clone(tree)
		crp.opts = &c.opts
		c.procs[crp.proc.ID] = crp
		c.order = append(c.order, crp)
	}
	return c
}

// clone returns a copy of rp and of its process, with its stack trees
// copied by tree.
func (rp *replay) clone(tree func(*stackTree) *stackTree) *replay {
	c := *rp
	p := *rp.proc
	p.Sites = slices.Clone(rp.proc.Sites)
	for i := range p.Sites {
		p.Sites[i].tree = tree(p.Sites[i].tree)
	}
	p.Problems = slices.Clone(rp.proc.Problems)
	p.Threads = slices.Clone(rp.proc.Threads)
	p.Bins = slices.Clone(rp.proc.Bins)
	p.LostReasons = slices.Clone(rp.proc.LostReasons)
	p.NotRecorded = slices.Clone(rp.proc.NotRecorded)
	if rp.proc.LeakScan != nil {
		// A filtered scan's classes change as its blocks come.
		scan := *rp.proc.LeakScan
		p.LeakScan = &scan
	}
	p.stacks = tree(rp.proc.stacks)
	c.proc = &p
	c.heap = rp.heap.clone()
	c.sites = siteIndex{dense: slices.Clone(rp.sites.dense), sparse: maps.Clone(rp.sites.sparse)}
	c.problems = maps.Clone(rp.problems)
	c.timeline = rp.timeline.clone()
	c.freedLonger = rp.freedLonger.clone()
	return &c
}

// clone returns a copy of s.
func (s *symbols) clone() *symbols {
	c := &symbols{objects: make(map[uint64]*Object, len(s.objects)), strings: maps.Clone(s.strings),
		frames: maps.Clone(s.frames), types: make(map[uint64]map[uint64][]string, len(s.types))}
	for id, o := range s.objects {
		oc := *o
		c.objects[id] = &oc
	}
	for obj, bySize := range s.types {
		cb := make(map[uint64][]string, len(bySize))
		for size, names := range bySize {
			cb[size] = slices.Clone(names)
		}
		c.types[obj] = cb
	}
	return c
}

// CheckpointsOfFile makes the checkpoints of the trace file at path (see
// Checkpoints).
func CheckpointsOfFile(path string, every, maxBytes uint64) ([]*Checkpoint, error) {
	return withTrace(path, func(r *trace.Reader) ([]*Checkpoint, error) { return Checkpoints(r, every, maxBytes) })
}

// AnalyzeFileFrom analyzes a window of the trace file at path going on
// from checkpoint cp, one of its own (see AnalyzeFrom).
func AnalyzeFileFrom(path string, cp *Checkpoint, opts Options) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(cp.at.Offset, io.SeekStart); err != nil {
		return nil, err
	}
	return AnalyzeFrom(cp, trace.NewReaderAt(bufio.NewReaderSize(f, 1<<20), cp.at), opts)
}
