package analysis

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/memtrail/memtrail/internal/trace"
)

// Frame is one source-level frame of a call stack.
type Frame struct {
	Function string // "" if unknown
	File     string // "" if unknown
	Line     uint64 // 0 if unknown
	Object   string // path of the ELF file holding the code; "" if unknown
	// Address is the return address relative to the object's load base,
	// the address the frame was symbolized at plus one.
	Address uint64
	// Inlined says that the function was inlined into the next frame's.
	Inlined bool
}

// Name returns the function of f, or if it is unknown where its code is,
// as the object's file name and the offset in it ("libfoo.so+0x1234").
func (f Frame) Name() string {
	switch {
	case f.Function != "":
		return f.Function
	case f.Object != "":
		return fmt.Sprintf("%s+0x%x", path.Base(f.Object), f.Address)
	}
	return "??"
}

// Object is an ELF file whose code ran in some process of the trace.
type Object struct {
	ID      uint64
	Path    string
	BuildID []byte
	// Status says how well it could be symbolized, if the trace says; the
	// message says why.
	Status        trace.SymbolStatus
	StatusMessage string
	HasStatus     bool
}

// Stack returns the frames of the call stack id of p, innermost first. It
// returns nil for stack 0, which stands for no stack.
func (p *Process) Stack(id uint64) []Frame {
	if p.stacks == nil {
		return nil
	}
	return p.stacks.frames(id)
}

// SizedFrame is a frame of a call stack with the bytes of stack its
// function's frame took, if known.
type SizedFrame struct {
	Frame
	Size    uint64
	HasSize bool // an inlined frame has no frame of its own
}

// DeepestFrames returns the frames of p's deepest stack
// (Summary.DeepestStack), innermost first, each with the size of its
// frame that the trace gives (DeepestStack.FrameSizes, one per frame of
// the machine stack: the last of the source frames of a code address, the
// ones inlined into it coming first, gets it).
func (p *Process) DeepestFrames() []SizedFrame {
	d := &p.Summary.DeepestStack
	if d.Stack == 0 || p.stacks == nil {
		return nil
	}
	var sized []SizedFrame
	for i, frames := range p.stacks.nodeFrames(d.Stack) {
		for j, f := range frames {
			sf := SizedFrame{Frame: f}
			if j == len(frames)-1 && i < len(d.FrameSizes) {
				sf.Size, sf.HasSize = d.FrameSizes[i], true
			}
			sized = append(sized, sf)
		}
	}
	return sized
}

// SiteStack returns the frames of the call stack of site s of p, which for
// an inherited site is a stack of the process's parent.
func (p *Process) SiteStack(s *Site) []Frame {
	if t := p.siteTree(s); t != nil {
		return t.frames(s.Stack)
	}
	return nil
}

// siteTree returns the tree that holds the call stack of site s of p: its
// parent's for an inherited site, else p's own (nil if p has none).
func (p *Process) siteTree(s *Site) *stackTree {
	if s.tree != nil {
		return s.tree
	}
	return p.stacks
}

// Objects returns the objects the call stacks of p run through, by ID.
func (p *Process) Objects() []*Object {
	if p.stacks == nil {
		return nil
	}
	return p.stacks.objects()
}

// TypeNames returns the names of the types of exactly size bytes that the
// trace gives for the objects mapped into p (its program's own: the
// recorder writes no types for system libraries), sorted, each once. They
// are what a block of that size may hold, as in mprof's allocation bins.
func (p *Process) TypeNames(size uint64) []string {
	if p.stacks == nil {
		return nil
	}
	return p.stacks.typeNames(size)
}

// maxDepth bounds the walk from a node to its root, in case damage made
// the tree a graph with a cycle.
const maxDepth = 4096

// stackTree is the call-stack tree of a process and what it needs to turn
// stacks into frames. Symbols come at the end of a trace, so stacks are
// resolved only when they are asked for, once the trace has been read.
type stackTree struct {
	owner   uint64 // the ID of the process it belongs to
	nodes   nodeTable
	modules map[uint64]uint64 // object ID by module ID
	syms    *symbols

	// known holds the frames of the stacks looked up so far, by ID: every
	// view goes through the stacks of all the sites, and the web UI
	// shows one view after another of one model, from several
	// goroutines.
	mu    sync.Mutex
	known map[uint64][]Frame
}

type stackNode struct {
	parent, module, offset uint64
}

// nodeTable holds the nodes of a stack tree by ID. A process's StackNode
// records give their IDs in order from 1, so most nodes are kept in a
// slice by ID: every record adds one, and a map's assignments and growth
// cost several times an index into a slice. An ID far past the nodes kept
// so far (only a damaged trace has one) goes to a map instead, which
// bounds the slice to twice the nodes in it, plus denseSlack.
type nodeTable struct {
	dense   []nodeSlot // by ID
	inDense int        // nodes in dense
	sparse  map[uint64]stackNode
}

// nodeSlot is a node of nodeTable.dense; known is false where no node
// has the slot's ID.
type nodeSlot struct {
	stackNode
	known bool
}

// denseSlack is how far past twice its nodes nodeTable.dense may reach.
const denseSlack = 1024

// get returns the node of id, if there is one.
func (t *nodeTable) get(id uint64) (stackNode, bool) {
	if id < uint64(len(t.dense)) {
		s := &t.dense[id]
		return s.stackNode, s.known
	}
	n, ok := t.sparse[id]
	return n, ok
}

// set makes n the node of id.
func (t *nodeTable) set(id uint64, n stackNode) {
	if id >= uint64(len(t.dense)) {
		limit := 2 * uint64(t.inDense+denseSlack)
		if id >= limit {
			if t.sparse == nil {
				t.sparse = make(map[uint64]stackNode)
			}
			t.sparse[id] = n
			return
		}
		t.grow(min(max(id+1, 2*uint64(len(t.dense))), limit))
	}
	s := &t.dense[id]
	if !s.known {
		t.inDense++
	}
	s.stackNode, s.known = n, true
}

// grow makes dense n long, and moves there the nodes of sparse it now
// reaches: the map holds only IDs past the slice.
func (t *nodeTable) grow(n uint64) {
	t.dense = slices.Grow(t.dense, int(n)-len(t.dense))[:n]
	for id, node := range t.sparse {
		if id < n {
			t.dense[id] = nodeSlot{node, true}
			t.inDense++
			delete(t.sparse, id)
		}
	}
}

// len returns how many nodes t holds.
func (t *nodeTable) len() int { return t.inDense + len(t.sparse) }

// all yields the nodes of t with their IDs, those of the slice first, in
// order.
func (t *nodeTable) all(yield func(uint64, stackNode) bool) {
	for id := range t.dense {
		if s := &t.dense[id]; s.known && !yield(uint64(id), s.stackNode) {
			return
		}
	}
	for id, n := range t.sparse {
		if !yield(id, n) {
			return
		}
	}
}

// clone returns a copy of t that shares nothing with it.
func (t *nodeTable) clone() nodeTable {
	return nodeTable{dense: slices.Clone(t.dense), inDense: t.inDense, sparse: maps.Clone(t.sparse)}
}

func newStackTree(syms *symbols, owner uint64) *stackTree {
	return &stackTree{owner: owner, modules: make(map[uint64]uint64), syms: syms}
}

// frames returns the frames of stack id, innermost first. They are
// shared: callers must not change them.
func (t *stackTree) frames(id uint64) []Frame {
	t.mu.Lock()
	defer t.mu.Unlock()
	if frames, ok := t.known[id]; ok {
		return frames
	}
	frames := t.walk(id)
	if t.known == nil {
		t.known = make(map[uint64][]Frame)
	}
	// Full, so that appending to them copies them.
	t.known[id] = frames[:len(frames):len(frames)]
	return t.known[id]
}

// walk makes the frames of stack id.
func (t *stackTree) walk(id uint64) []Frame {
	var frames []Frame
	for depth := 0; id != 0 && depth < maxDepth; depth++ {
		n, ok := t.nodes.get(id)
		if !ok {
			// The node was lost with a damaged part of the trace: say
			// that the stack goes on, even if not where.
			return append(frames, Frame{})
		}
		frames = t.appendFrames(frames, n)
		id = n.parent
	}
	return frames
}

// nodeFrames returns the frames of stack id node by node, innermost
// first.
func (t *stackTree) nodeFrames(id uint64) [][]Frame {
	t.mu.Lock()
	defer t.mu.Unlock()
	var nodes [][]Frame
	for depth := 0; id != 0 && depth < maxDepth; depth++ {
		n, ok := t.nodes.get(id)
		if !ok {
			return append(nodes, []Frame{{}})
		}
		nodes = append(nodes, t.appendFrames(nil, n))
		id = n.parent
	}
	return nodes
}

// appendFrames appends the frames of node n to frames.
func (t *stackTree) appendFrames(frames []Frame, n stackNode) []Frame {
	if n.module == trace.ModuleCut {
		return append(frames, CutFrame(n.offset))
	}
	return t.syms.appendFrames(frames, t.modules[n.module], n.offset)
}

// CutFrame is the outermost frame of a call stack deeper than the
// recording's depth limit: it stands for the n frames outside the ones
// recorded (n is 0 when their number is not known).
func CutFrame(n uint64) Frame {
	if n == 0 {
		return Frame{Function: "[frames not recorded]"}
	}
	return Frame{Function: fmt.Sprintf("[%s not recorded]", plural(n, "frame"))}
}

// cutWalk is what the walk from a node to its root found.
type cutWalk struct {
	steps   int32 // to the root
	cut     bool  // the root is a node of module trace.ModuleCut
	missing bool  // a node on the way is not in the tree
	known   bool  // the walk was made (in a cutMemo)
}

// cutMemo holds the walks that stackTree.cut made from the nodes of a
// tree, by node ID: in a slice for the IDs of the tree's slice of nodes,
// like the nodes themselves, and in a map for the others.
type cutMemo struct {
	dense  []cutWalk
	sparse map[uint64]cutWalk
}

func newCutMemo(t *stackTree) *cutMemo {
	return &cutMemo{dense: make([]cutWalk, len(t.nodes.dense)), sparse: make(map[uint64]cutWalk)}
}

func (m *cutMemo) get(id uint64) (cutWalk, bool) {
	if id < uint64(len(m.dense)) {
		w := m.dense[id]
		return w, w.known
	}
	w, ok := m.sparse[id]
	return w, ok
}

func (m *cutMemo) set(id uint64, w cutWalk) {
	w.known = true
	if id < uint64(len(m.dense)) {
		m.dense[id] = w
		return
	}
	m.sparse[id] = w
}

// cut reports whether stack id was cut at the depth limit: its root is a
// node of module trace.ModuleCut. It is asked for the stacks of all the
// sites, which share most of their nodes on the way to their roots, so a
// walk ends at the first node an earlier one went through, which memo
// has: one walk a site, in a map, was most of the time of a report of
// python3's deep stacks after the replay.
func (t *stackTree) cut(id uint64, memo *cutMemo) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	var path []uint64
	var end cutWalk // what the node past the last of path found
	for cur := id; ; {
		if w, ok := memo.get(cur); ok {
			end = w
			break
		}
		if len(path) == maxDepth {
			return false // a cycle, or deeper than cut goes
		}
		n, ok := t.nodes.get(cur)
		if !ok {
			end = cutWalk{missing: true}
			memo.set(cur, end)
			break
		}
		if n.parent == 0 {
			end = cutWalk{cut: n.module == trace.ModuleCut}
			memo.set(cur, end)
			break
		}
		path = append(path, cur)
		cur = n.parent
	}
	for i := len(path) - 1; i >= 0; i-- {
		end.steps++
		memo.set(path[i], end)
	}
	w, _ := memo.get(id)
	return !w.missing && w.steps < maxDepth && w.cut
}

// CutStacks sums up the sites of a process whose call stacks were deeper
// than the recording's depth limit (see CutFrame).
type CutStacks struct {
	Allocations uint64 // made from them
	PeakBytes   uint64 // of blocks from them live at the process's peak
}

// CutStacks returns what the sites of p with cut call stacks add up to.
func (p *Process) CutStacks() CutStacks {
	var c CutStacks
	memos := map[*stackTree]*cutMemo{}
	for i := range p.Sites {
		s := &p.Sites[i]
		tree := p.siteTree(s)
		if tree == nil || s.Stack == 0 {
			continue
		}
		memo := memos[tree]
		if memo == nil {
			memo = newCutMemo(tree)
			memos[tree] = memo
		}
		if tree.cut(s.Stack, memo) {
			c.Allocations += s.Allocations
			c.PeakBytes += s.PeakBytes
		}
	}
	return c
}

// AllWarnings returns the model's Warnings, about the trace itself, and
// then what the reader of a report must know of the recording (naming a
// process as -pid does, with its image when its pid had several): which
// processes bypass memtrail's hooks, which damaged memtrail's buffer, so
// that their history stops early, and which have call stacks cut at the
// depth limit, and how much of their memory that hides.
func (m *Model) AllWarnings() []string {
	out := slices.Clone(m.Warnings)
	x := m.Images()
	for _, p := range m.Processes {
		name := x.name(p)
		for _, what := range p.NotRecorded {
			out = append(out, fmt.Sprintf("%s (%s): %s", name, p.Exe, what))
		}
		for _, why := range p.LostReasons {
			if strings.HasPrefix(why, trace.LostRegionDamaged) {
				out = append(out, fmt.Sprintf("%s: %s; what it did after that was not recorded", name, why))
			}
		}
		c := p.CutStacks()
		if c.Allocations == 0 {
			continue
		}
		limit := "the depth limit"
		if m.Info != nil {
			limit = plural(m.Info.MaxFrames, "frame")
		}
		share := 0.0
		if p.Summary.PeakBytes > 0 {
			share = 100 * float64(c.PeakBytes) / float64(p.Summary.PeakBytes)
		}
		out = append(out, fmt.Sprintf("%s: call stacks cut at %s: %s, %s at the peak (%.1f%% of it); "+
			"record with a larger -max-frames to see them whole",
			name, limit, plural(c.Allocations, "allocation"), plural(c.PeakBytes, "byte"), share))
	}
	return out
}

func (t *stackTree) objects() []*Object {
	seen := make(map[uint64]bool)
	for _, n := range t.nodes.all {
		seen[t.modules[n.module]] = true
	}
	var objs []*Object
	for id := range seen {
		if o, ok := t.syms.objects[id]; ok {
			objs = append(objs, o)
		}
	}
	sortObjects(objs)
	return objs
}

func (t *stackTree) typeNames(size uint64) []string {
	var names []string
	seen := make(map[uint64]bool, len(t.modules))
	for _, obj := range t.modules {
		if !seen[obj] {
			seen[obj] = true
			names = append(names, t.syms.types[obj][size]...)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// symbols holds what the trace says about objects, their code and their
// types, shared by all processes.
type symbols struct {
	objects map[uint64]*Object
	strings map[uint64]string
	frames  map[codeAddr][]trace.Frame
	types   map[uint64]map[uint64][]string // type names by object, then size
}

type codeAddr struct{ object, offset uint64 }

func newSymbols() *symbols {
	return &symbols{
		objects: make(map[uint64]*Object),
		strings: make(map[uint64]string),
		frames:  make(map[codeAddr][]trace.Frame),
		types:   make(map[uint64]map[uint64][]string),
	}
}

func (s *symbols) record(rec trace.Record) {
	switch rec.Kind {
	case trace.KindObject:
		o := s.object(rec.Object.ID)
		o.Path, o.BuildID = rec.Object.Path, rec.Object.BuildID
	case trace.KindString:
		s.strings[rec.String.ID] = rec.String.Value
	case trace.KindSymbol:
		s.frames[codeAddr{rec.Symbol.Object, rec.Symbol.Offset}] = rec.Symbol.Frames
	case trace.KindObjectStatus:
		o := s.object(rec.ObjectStatus.Object)
		o.Status, o.StatusMessage, o.HasStatus = rec.ObjectStatus.Status, rec.ObjectStatus.Message, true
	case trace.KindType:
		bySize := s.types[rec.Type.Object]
		if bySize == nil {
			bySize = make(map[uint64][]string)
			s.types[rec.Type.Object] = bySize
		}
		bySize[rec.Type.Size] = append(bySize[rec.Type.Size], rec.Type.Name)
	}
}

func (s *symbols) object(id uint64) *Object {
	o, ok := s.objects[id]
	if !ok {
		o = &Object{ID: id}
		s.objects[id] = o
	}
	return o
}

// appendFrames appends the frames of the return address offset of object.
func (s *symbols) appendFrames(frames []Frame, object, offset uint64) []Frame {
	var objPath string
	if o, ok := s.objects[object]; ok {
		objPath = o.Path
	}
	sym := s.frames[codeAddr{object, offset}]
	if len(sym) == 0 {
		return append(frames, Frame{Object: objPath, Address: offset})
	}
	for i, f := range sym {
		frames = append(frames, Frame{
			Function: s.strings[f.Function],
			File:     s.strings[f.File],
			Line:     f.Line,
			Object:   objPath,
			Address:  offset,
			Inlined:  i < len(sym)-1,
		})
	}
	return frames
}

func sortObjects(objs []*Object) {
	slices.SortFunc(objs, func(a, b *Object) int { return cmpUint(a.ID, b.ID) })
}
