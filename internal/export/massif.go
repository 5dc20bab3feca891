package export

import (
	"bufio"
	"fmt"
	"io"
	"strconv"

	"github.com/memtrail/memtrail/internal/analysis"
)

// maxSnapshots bounds the snapshots of a massif file, as massif's
// --max-snapshots does (its default is 100).
const maxSnapshots = 100

// massifThreshold is the share of a snapshot's heap, in percent, under
// which a call stack is summed up with the others like it rather than
// shown: massif's default --threshold.
const massifThreshold = 1.0

// Massif writes the heap of process p over time in the format of
// valgrind massif's massif.out, which ms_print and massif-visualizer read:
//
//  1. One snapshot per step of the process's timeline (merged two by two
//     until there are at most maxSnapshots), at the step's start, in ms
//     since the process started. Its mem_heap_B is the most that was live
//     in the step, so that no peak falls between two snapshots, and its
//     mem_stacks_B the most stack the threads had in use together at the
//     heap events of the step (0 for a trace without stack samples);
//     memtrail does not measure the allocator's overhead, so
//     mem_heap_extra_B is 0.
//  2. The snapshot of the step that holds the peak is at the moment of the
//     peak, and detailed: its tree is the bottom-up tree of the blocks
//     live then, from the allocation functions outward to main.
//  3. A last, detailed snapshot at the end of the process shows what was
//     still live.
//
// The trees follow massif's layout: a node per function, its children
// the callers, those under massifThreshold of the snapshot summed up in
// one "in N places" node; one space of indent per level.
func Massif(w io.Writer, p *analysis.Process) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "desc: memtrail: every allocation recorded; stacks sampled at heap events; mem_heap_extra_B not measured\n")
	fmt.Fprintf(bw, "cmd: %s\n", commandLine(p))
	fmt.Fprintf(bw, "time_unit: ms\n")
	sites := p.SiteList()
	snapshots := massifSnapshots(p)
	for i, s := range snapshots {
		var tree *analysis.TreeNode
		switch s.kind {
		case "peak":
			tree = p.BottomUp(sites, analysis.CostPeak)
		case "detailed":
			tree = p.BottomUp(sites, analysis.CostLeaked)
		}
		writeSnapshot(bw, i, s, tree)
	}
	return bw.Flush()
}

// massifSnapshot is one snapshot of a massif file.
type massifSnapshot struct {
	time   uint64 // ns after the start of the process
	bytes  uint64
	stacks uint64 // stack in use, all threads together
	kind   string // heap_tree: empty, peak or detailed
}

// massifSnapshots returns the snapshots of the heap of p, as Massif says.
func massifSnapshots(p *analysis.Process) []massifSnapshot {
	tl := p.Timeline
	points := tl.Points
	step := tl.Step
	// Room for the last snapshot, at the end.
	for len(points) > maxSnapshots-1 {
		merged := make([]analysis.TimelinePoint, (len(points)+1)/2)
		for i := range merged {
			merged[i] = points[2*i]
			if 2*i+1 < len(points) {
				merged[i] = merged[i].Merge(points[2*i+1])
			}
		}
		points, step = merged, step*2
	}
	var snapshots []massifSnapshot
	sawPeak := false
	for i, pt := range points {
		s := massifSnapshot{time: sinceStart(p, tl.Start+uint64(i)*step), bytes: pt.PeakBytes, stacks: pt.StackBytes, kind: "empty"}
		if !sawPeak && pt.PeakBytes == p.Summary.PeakBytes && pt.PeakBytes > 0 {
			sawPeak = true
			s.time, s.kind = max(s.time, sinceStart(p, p.Summary.PeakTime)), "peak"
		}
		snapshots = append(snapshots, s)
	}
	end := massifSnapshot{time: p.RunTime(), bytes: p.Summary.InUseAtExitBytes, kind: "detailed"}
	if len(points) > 0 {
		end.stacks = points[len(points)-1].StackBytes
	}
	return append(snapshots, end)
}

// sinceStart returns t, ns since the trace's time zero, in ns since p
// started.
func sinceStart(p *analysis.Process, t uint64) uint64 {
	if t < p.Start {
		return 0
	}
	return t - p.Start
}

// writeSnapshot writes snapshot number n, and its tree if it has one.
func writeSnapshot(w *bufio.Writer, n int, s massifSnapshot, tree *analysis.TreeNode) {
	fmt.Fprintf(w, "#-----------\nsnapshot=%d\n#-----------\n", n)
	// In ms, to the µs: massif writes whole ms, but a short run would
	// then have all its snapshots at 0.
	ms := strconv.FormatFloat(float64(s.time/1000)/1000, 'f', -1, 64)
	fmt.Fprintf(w, "time=%s\nmem_heap_B=%d\nmem_heap_extra_B=0\nmem_stacks_B=%d\nheap_tree=%s\n", ms, s.bytes, s.stacks, s.kind)
	if tree == nil {
		return
	}
	writeMassifNode(w, tree, 0, s.bytes)
}

// writeMassifNode writes node n of a tree at depth, and its callers under
// it; total is the snapshot's heap, which the threshold is a share of.
func writeMassifNode(w *bufio.Writer, n *analysis.TreeNode, depth int, total uint64) {
	var shown []*analysis.TreeNode
	var hidden, hiddenBytes uint64
	for _, c := range n.Children {
		if float64(c.Cost)*100 >= massifThreshold*float64(total) {
			shown = append(shown, c)
		} else {
			hidden++
			hiddenBytes += c.Cost
		}
	}
	children := len(shown)
	if hidden > 0 {
		children++
	}
	// The root, all the stacks, stands for the allocation functions.
	label := "(heap allocation functions) malloc/new/new[], --alloc-fns, etc."
	if depth > 0 {
		label = massifLabel(n.Frame)
	}
	fmt.Fprintf(w, "%*sn%d: %d %s\n", depth, "", children, n.Cost, label)
	for _, c := range shown {
		writeMassifNode(w, c, depth+1, total)
	}
	if hidden > 0 {
		// massif's own words, which massif-visualizer looks for.
		places := "places, all"
		if hidden == 1 {
			places = "place,"
		}
		fmt.Fprintf(w, "%*sn0: %d in %d %s below massif's threshold (%.2f%%)\n", depth+1, "", hiddenBytes, hidden, places, massifThreshold)
	}
}

// massifLabel returns the label of a frame in a massif tree, as massif
// writes it: "0x4005A3: f (file.c:12)", or "0x4005A3: ??? (in
// /lib/libfoo.so)" where the function is unknown. The address is the
// return address in the frame's object; nodes merging several have none.
func massifLabel(f analysis.Frame) string {
	var label string
	if f.Address != 0 {
		label = fmt.Sprintf("0x%X: ", f.Address)
	}
	if f.Function != "" {
		label += oneLine(f.Function)
	} else {
		label += "???"
	}
	switch {
	case f.File != "" && f.Line != 0:
		label += fmt.Sprintf(" (%s:%d)", oneLine(f.File), f.Line)
	case f.File != "":
		label += fmt.Sprintf(" (%s)", oneLine(f.File))
	case f.Object != "":
		label += fmt.Sprintf(" (in %s)", oneLine(f.Object))
	}
	return label
}
