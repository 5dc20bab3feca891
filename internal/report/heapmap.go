package report

import (
	"fmt"
	"strings"
)

// HeapMapCells is how many cells the heap map view asks the analysis for:
// a square of 64 by 64.
const HeapMapCells = 64 * 64

// fullness are the characters of the text heap map, from empty to full.
const fullness = " .:-=+*#%@"

func heapMapText(t *textReport) {
	hm := t.p.HeapMap
	t.printf("\nHeap map %s", t.endLabel())
	if hm == nil || len(hm.Cells) == 0 {
		t.printf("\n  none\n")
		return
	}
	t.printf(": %s in %s, cells of %s; a cell is %q when empty, %q when full\n",
		Plural(uint64(len(hm.Regions)), "region"), Plural(uint64(len(hm.Cells)), "cell"), Size(hm.CellBytes),
		fullness[:1], fullness[len(fullness)-1:])
	const width = 64
	for i, r := range hm.Regions {
		end := len(hm.Cells)
		if i+1 < len(hm.Regions) {
			end = hm.Regions[i+1].FirstCell
		}
		t.printf("  %#x–%#x (%s)\n", r.Start, r.End, Size(r.End-r.Start))
		for row := r.FirstCell; row < end; row += width {
			var b strings.Builder
			for _, c := range hm.Cells[row:min(row+width, end)] {
				b.WriteByte(fullness[fullnessOf(c.Used, hm.CellBytes)])
			}
			t.printf("    |%s|\n", b.String())
		}
	}
}

// fullnessOf returns the index in fullness of a cell with used bytes of
// size: 0 only if empty, the last only if full.
func fullnessOf(used, size uint64) int {
	switch {
	case used == 0:
		return 0
	case used >= size:
		return len(fullness) - 1
	}
	return 1 + int(used*uint64(len(fullness)-2)/size)
}

type jsonHeapMap struct {
	CellBytes uint64           `json:"cell_bytes"`
	Regions   []jsonHeapRegion `json:"regions"`
	Cells     []jsonHeapCell   `json:"cells"`
	// Stacks holds the call stack of each cell's biggest block, by its
	// site (a number, as a string): many cells share one.
	Stacks map[string][]jsonFrame `json:"stacks"`
}

type jsonHeapRegion struct {
	Start     string `json:"start"`
	End       string `json:"end"`
	FirstCell int    `json:"first_cell"`
}

type jsonHeapCell struct {
	Used    uint64         `json:"used"`   // bytes of live blocks in it
	Blocks  uint64         `json:"blocks"` // live blocks that start in it
	Biggest *jsonHeapBlock `json:"biggest,omitempty"`
}

type jsonHeapBlock struct {
	Address     string   `json:"address"`
	Size        uint64   `json:"size"`
	Types       []string `json:"types"`
	AllocatedNS uint64   `json:"allocated_ns"`
	Site        int      `json:"site"` // its call stack is Stacks[site]
}

func heapMapJSON(c *viewContext) any {
	p := c.p
	j := jsonHeapMap{Regions: []jsonHeapRegion{}, Cells: []jsonHeapCell{}, Stacks: map[string][]jsonFrame{}}
	hm := p.HeapMap
	if hm == nil {
		return j
	}
	j.CellBytes = hm.CellBytes
	for _, r := range hm.Regions {
		j.Regions = append(j.Regions, jsonHeapRegion{Start: hex(r.Start), End: hex(r.End), FirstCell: r.FirstCell})
	}
	for _, cell := range hm.Cells {
		jc := jsonHeapCell{Used: cell.Used, Blocks: cell.Blocks}
		if cell.Blocks > 0 {
			o := cell.Biggest
			s := &p.Sites[o.Site]
			jc.Biggest = &jsonHeapBlock{Address: hex(o.Addr), Size: o.Size, Types: orEmpty(p.TypeNames(o.Size)),
				AllocatedNS: sinceStart(p, o.Allocated), Site: o.Site}
			if key := fmt.Sprint(o.Site); j.Stacks[key] == nil {
				j.Stacks[key] = jsonFrames(p.SiteStack(s))
			}
		}
		j.Cells = append(j.Cells, jc)
	}
	return j
}
