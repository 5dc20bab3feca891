package report

import (
	"fmt"
	"slices"

	"github.com/memtrail/memtrail/internal/analysis"
)

func threadsText(t *textReport) {
	p := t.p
	t.printf("\nThreads\n")
	if len(p.Threads) == 0 {
		t.printf("  none\n")
		return
	}
	stacks := hasStacks(p)
	rows := [][]string{{"thread", "tid", "allocations", "allocated", "frees", "peak", "at", "in use at exit"}}
	if stacks {
		rows[0] = append(rows[0], "stack peak")
	}
	sampled, exact := false, false
	for _, th := range p.Threads {
		at := "-"
		if th.PeakBytes > 0 {
			at = Duration(sinceStart(p, th.PeakTime))
		}
		row := []string{fmt.Sprint(th.Index), fmt.Sprint(th.TID), Count(th.Allocations), Size(th.BytesAllocated),
			Count(th.Frees), Size(th.PeakBytes), at, Size(th.InUseAtExitBytes)}
		if stacks {
			stack := Size(th.StackPeakBytes)
			if th.StackSampledOnly && th.StackPeakBytes > 0 {
				stack += " (sampled)"
				sampled = true
			} else if th.StackCalls > 0 {
				stack += " (exact)"
				exact = true
			}
			row = append(row, stack)
		}
		rows = append(rows, row)
	}
	t.table(rows, []bool{true, true, true, true, true, true, true, true, true})
	t.printf("  (a thread's peak and bytes in use count the blocks it allocated, whoever frees them)\n")
	if stacks {
		t.printf("  (its stack peak is the most of its stack in use, from its base: the deepest byte it wrote%s%s)\n",
			map[bool]string{true: ", or where only sampled, the deepest of its allocator calls", false: ""}[sampled],
			map[bool]string{true: ", or where exact, the deepest of its function entries and allocator calls", false: ""}[exact])
	}
}

// hasStacks reports whether the trace measured the stacks of p's threads:
// traces of memtrail before it did not.
func hasStacks(p *analysis.Process) bool {
	for _, th := range p.Threads {
		if th.StackPeakBytes > 0 {
			return true
		}
	}
	return false
}

type jsonThread struct {
	Index            uint64 `json:"index"`
	TID              uint64 `json:"tid"`
	Allocations      uint64 `json:"allocations"`
	BytesAllocated   uint64 `json:"bytes_allocated"`
	Frees            uint64 `json:"frees"`
	PeakBytes        uint64 `json:"peak_bytes"`
	PeakTimeNS       uint64 `json:"peak_time_ns"`
	InUseAtExitBytes uint64 `json:"in_use_at_exit_bytes"`
	// The deepest stack in use, when the deepest allocator call was made,
	// and whether the trace had only those calls to say (no high-water
	// mark, or a window).
	StackPeakBytes   uint64 `json:"stack_peak_bytes"`
	StackPeakTimeNS  uint64 `json:"stack_peak_time_ns"`
	StackSampledOnly bool   `json:"stack_sampled_only"`
	// The function entries and returns measured: its peak is exact.
	StackCalls uint64 `json:"stack_calls"`
}

func threadsJSON(c *viewContext) any {
	p := c.p
	list := make([]jsonThread, 0, len(p.Threads))
	for _, th := range p.Threads {
		list = append(list, jsonThread{Index: th.Index, TID: th.TID, Allocations: th.Allocations,
			BytesAllocated: th.BytesAllocated, Frees: th.Frees, PeakBytes: th.PeakBytes,
			PeakTimeNS: sinceStart(p, th.PeakTime), InUseAtExitBytes: th.InUseAtExitBytes,
			StackPeakBytes: th.StackPeakBytes, StackPeakTimeNS: sinceStart(p, th.StackPeakTime), StackSampledOnly: th.StackSampledOnly,
			StackCalls: th.StackCalls})
	}
	return struct {
		Threads []jsonThread `json:"threads"`
	}{list}
}

// sizeRange names bucket i of the size histogram: "0 bytes", "8 to 15
// bytes".
func sizeRange(i int) (from, to uint64, label string) {
	if i == 0 {
		return 0, 0, "0 bytes"
	}
	from, to = uint64(1)<<(i-1), uint64(1)<<(i-1)*2-1
	if from == to {
		return from, to, Plural(from, "byte")
	}
	return from, to, fmt.Sprintf("%s to %s", Size(from), Size(to))
}

func sizesText(t *textReport) {
	p := t.p
	t.printf("\nSizes of the allocations\n")
	if p.Summary.Allocations == 0 {
		t.printf("  none\n")
		return
	}
	rows := [][]string{{"size", "allocations", "", "bytes", ""}}
	for i, b := range p.Sizes {
		if b.Allocations == 0 {
			continue
		}
		_, _, label := sizeRange(i)
		rows = append(rows, []string{label, Count(b.Allocations), percent(b.Allocations, p.Summary.Allocations),
			Size(b.Bytes), bar(b.Allocations, p.Summary.Allocations)})
	}
	t.table(rows, []bool{false, true, true, true, false})
}

type jsonSizeBucket struct {
	From        uint64 `json:"from"`
	To          uint64 `json:"to"` // included
	Allocations uint64 `json:"allocations"`
	Bytes       uint64 `json:"bytes"`
}

func sizesJSON(c *viewContext) any {
	list := []jsonSizeBucket{}
	for i, b := range c.p.Sizes {
		if b.Allocations == 0 {
			continue
		}
		from, to, _ := sizeRange(i)
		list = append(list, jsonSizeBucket{From: from, To: to, Allocations: b.Allocations, Bytes: b.Bytes})
	}
	return struct {
		Buckets []jsonSizeBucket `json:"buckets"`
	}{list}
}

// timelineRows is how many rows the text timeline has at most: the
// timeline's points are merged into that many.
const timelineRows = 24

func timelineText(t *textReport) {
	p := t.p
	tl := p.Timeline
	t.printf("\nHeap over time\n")
	if len(tl.Points) == 0 || p.Summary.PeakBytes == 0 && p.Summary.Allocations == 0 && p.Summary.Frees == 0 {
		t.printf("  none\n")
		return
	}
	per := (len(tl.Points) + timelineRows - 1) / timelineRows
	stacks := p.Summary.StackPeakBytes > 0
	rows := [][]string{{"from", "heap (most)", "", "blocks", "allocations", "per second", ""}}
	if stacks {
		rows[0] = slices.Insert(rows[0], 3, "stack (most)")
	}
	for i := 0; i < len(tl.Points); i += per {
		pt := mergePoints(tl.Points[i:min(i+per, len(tl.Points))])
		span := tl.Step * uint64(per)
		rate := "-"
		if span > 0 {
			rate = Count(uint64(float64(pt.Allocations) * 1e9 / float64(span)))
		}
		from := tl.Time(i)
		mark := ""
		if peak := p.Summary.PeakTime; peak >= from && peak < from+span && p.Summary.PeakBytes > 0 {
			mark = "← peak"
		}
		row := []string{Duration(sinceStart(p, from)), Size(pt.PeakBytes), bar(pt.PeakBytes, p.Summary.PeakBytes),
			Count(pt.PeakBlocks), Count(pt.Allocations), rate, mark}
		if stacks {
			row = slices.Insert(row, 3, Size(pt.StackBytes))
		}
		rows = append(rows, row)
	}
	t.table(rows, []bool{true, true, false, true, true, true, true, false})
	t.printf("  (%s a row; memtrail view draws all %d points)\n", Duration(tl.Step*uint64(per)), len(tl.Points))
}

// mergePoints merges consecutive points of a timeline into one.
func mergePoints(pts []analysis.TimelinePoint) analysis.TimelinePoint {
	m := pts[0]
	for _, pt := range pts[1:] {
		m = m.Merge(pt)
	}
	return m
}

type jsonTimeline struct {
	StartNS uint64              `json:"start_ns"` // since the process started
	StepNS  uint64              `json:"step_ns"`
	Points  []jsonTimelinePoint `json:"points"`
}

type jsonTimelinePoint struct {
	PeakBytes      uint64 `json:"peak_bytes"` // the most live in the step
	PeakBlocks     uint64 `json:"peak_blocks"`
	EndBytes       uint64 `json:"end_bytes"` // live at its end
	EndBlocks      uint64 `json:"end_blocks"`
	Allocations    uint64 `json:"allocations"`
	BytesAllocated uint64 `json:"bytes_allocated"`
	Frees          uint64 `json:"frees"`
	BytesFreed     uint64 `json:"bytes_freed"`
	StackBytes     uint64 `json:"stack_bytes"` // the most stack in use in the step, all threads together
}

func timelineJSON(c *viewContext) any {
	tl := c.p.Timeline
	pts := make([]jsonTimelinePoint, 0, len(tl.Points))
	for _, pt := range tl.Points {
		pts = append(pts, jsonTimelinePoint(pt))
	}
	return jsonTimeline{StartNS: sinceStart(c.p, tl.Start), StepNS: tl.Step, Points: pts}
}
