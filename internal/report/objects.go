package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
)

// objectList returns the object list that opts asks for, its title
// (where "END" stands for the end of the window), and the moment ages are
// counted to (ns since time zero).
func objectList(p *analysis.Process, order ObjectOrder) ([]analysis.HeapObject, string, uint64) {
	end := p.Start + p.Window.To
	switch order {
	case ByAge:
		return p.OldestObjects, "Objects live END, the oldest first", end
	case ByLifetime:
		return p.FreedObjects, "Objects freed, those that lived longest first", end
	}
	return p.LiveObjects, "Objects live END, the biggest first", end
}

func objectsText(t *textReport) {
	p := t.p
	objs, title, end := objectList(p, t.opts.Objects)
	objs = objs[:min(len(objs), t.opts.top())]
	t.printf("\n%s\n", strings.Replace(title, "END", t.endLabel(), 1))
	if len(objs) == 0 {
		t.printf("  none\n")
		return
	}
	for i, o := range objs {
		if i > 0 {
			t.printf("\n")
		}
		t.printf("  #%-3d%s\n", i+1, objectHeadline(p, &o, end))
		s := &p.Sites[o.Site]
		t.frames(s.Stack, p.SiteStack(s), "      ")
	}
}

// objectHeadline says what an object is: where, how big, when it was
// allocated and freed, by which thread.
func objectHeadline(p *analysis.Process, o *analysis.HeapObject, end uint64) string {
	line := fmt.Sprintf("%s at %#x", Size(o.Size), o.Addr)
	if types := p.TypeNames(o.Size); len(types) > 0 {
		line += " (" + Printable(strings.Join(types, " or ")) + "?)"
	}
	line += fmt.Sprintf(", allocated %s after start", Duration(sinceStart(p, o.Allocated)))
	if o.Freed != 0 {
		line += fmt.Sprintf(", freed %s later", Duration(o.Age(end)))
	} else {
		line += fmt.Sprintf(", %s old", Duration(o.Age(end)))
	}
	if o.Thread != 0 {
		line += fmt.Sprintf(", thread %d", o.Thread)
	}
	if o.Reallocs > 0 {
		line += ", " + Plural(o.Reallocs, "realloc")
	}
	return line
}

type jsonObjects struct {
	Order string `json:"order"` // size, age or lifetime
	// Total is how many objects the window has in that order (live at
	// its end, or freed in it), of which Objects lists the first.
	Total   uint64       `json:"total"`
	Objects []jsonObject `json:"objects"`
}

type jsonObject struct {
	Address     string      `json:"address"`
	Size        uint64      `json:"size"`
	Types       []string    `json:"types"`        // the program's types of that size: a guess at what it is
	AllocatedNS uint64      `json:"allocated_ns"` // since the process started
	Live        bool        `json:"live"`
	FreedNS     uint64      `json:"freed_ns"` // 0 if live
	AgeNS       uint64      `json:"age_ns"`   // until freed, or until the end of the window
	Thread      uint64      `json:"thread"`   // 0: inherited from the parent at a fork
	Reallocs    uint64      `json:"reallocs"`
	API         string      `json:"api"`
	StackID     uint64      `json:"stack_id"`
	Stack       []jsonFrame `json:"stack"`
	FreeStack   []jsonFrame `json:"free_stack"` // empty if live
}

func objectsJSON(c *viewContext) any {
	p := c.p
	objs, _, end := objectList(p, c.opts.Objects)
	list := make([]jsonObject, 0, len(objs))
	for _, o := range objs {
		s := &p.Sites[o.Site]
		jo := jsonObject{Address: fmt.Sprintf("%#x", o.Addr), Size: o.Size, Types: orEmpty(p.TypeNames(o.Size)),
			AllocatedNS: sinceStart(p, o.Allocated),
			Live:        o.Freed == 0, AgeNS: o.Age(end), Thread: o.Thread, Reallocs: o.Reallocs, API: o.API.String(),
			StackID: s.Stack, Stack: jsonFrames(p.SiteStack(s)), FreeStack: jsonStack(p, o.FreeStack)}
		if o.Freed != 0 {
			jo.FreedNS = sinceStart(p, o.Freed)
		}
		list = append(list, jo)
	}
	return jsonObjects{Order: [...]string{"size", "age", "lifetime"}[c.opts.Objects], Total: objectCount(p, c.opts.Objects), Objects: list}
}

// objectCount returns how many objects the list of order is the first
// of: those live at the end of the window, or those freed in it.
func objectCount(p *analysis.Process, order ObjectOrder) uint64 {
	var n uint64
	for i := range p.Sites {
		if order == ByLifetime {
			n += deaths(&p.Sites[i])
		} else {
			n += p.Sites[i].InUseAtExitBlocks
		}
	}
	return n
}

// deaths returns how many objects from site s were freed: its frees but
// those of reallocs, which move an object on rather than end it.
func deaths(s *analysis.Site) uint64 {
	var n uint64
	for _, c := range s.Lifetimes {
		n += c
	}
	return n
}

// lifetimeSites returns the sites whose objects have a lifetime to show
// (freed ones, or live ones at the end), most objects first.
func lifetimeSites(p *analysis.Process) []*analysis.Site {
	var sites []*analysis.Site
	for _, s := range p.SiteList() {
		if s.Allocations > 0 || s.InUseAtExitBlocks > 0 {
			sites = append(sites, s)
		}
	}
	slices.SortStableFunc(sites, func(a, b *analysis.Site) int {
		return cmpDesc(deaths(a)+a.InUseAtExitBlocks, deaths(b)+b.InUseAtExitBlocks)
	})
	return sites
}

func lifetimesText(t *textReport) {
	p := t.p
	sites := lifetimeSites(p)
	t.printf("\nLifetimes of objects by call stack")
	if len(sites) > t.opts.top() {
		t.printf(", top %d of %d", t.opts.top(), len(sites))
	}
	t.printf("\n")
	if len(sites) == 0 {
		t.printf("  none\n")
		return
	}
	for i, s := range sites[:min(len(sites), t.opts.top())] {
		if i > 0 {
			t.printf("\n")
		}
		died := deaths(s)
		t.printf("  #%-3d%s freed", i+1, Plural(died, "object"))
		if moved := s.Frees - died; moved > 0 {
			t.printf(", %s moved by realloc", Count(moved))
		}
		t.printf(", %s still live at the end\n", Count(s.InUseAtExitBlocks))
		t.frames(s.Stack, p.SiteStack(s), "      ")
		rows := [][]string{{"lived", "objects", ""}}
		for b, n := range s.Lifetimes {
			if n > 0 {
				rows = append(rows, []string{t.lifetimeLabel(b), Count(n), bar(n, died)})
			}
		}
		if len(rows) > 1 {
			t.tableIndented(rows, []bool{false, true, false}, "    ")
		}
		rows = [][]string{{"allocations between", "objects", ""}}
		for b, n := range s.LifetimeAllocs {
			if n > 0 {
				rows = append(rows, []string{allocsLabel(b), Count(n), bar(n, died)})
			}
		}
		if len(rows) > 1 {
			t.tableIndented(rows, []bool{false, true, false}, "    ")
		}
	}
}

// lifetimeLabel names bucket b of a histogram of lifetimes in time, whose
// buckets count time units.
func (t *textReport) lifetimeLabel(b int) string {
	unit := t.timeUnit()
	switch {
	case b == 0:
		return "under " + Duration(unit)
	case b == analysis.LifetimeBuckets-1:
		return Duration(unit*analysis.BucketStart(b)) + " or more"
	case b == 1:
		return Duration(unit) + " to " + Duration(3*unit)
	}
	return Duration(unit*analysis.BucketStart(b)) + " to " + Duration(unit*(analysis.BucketStart(b+1)-1))
}

// allocsLabel names bucket b of a histogram of lifetimes in allocations.
func allocsLabel(b int) string {
	from := analysis.BucketStart(b)
	switch {
	case b == 0:
		return "0 (temporary)"
	case b == analysis.LifetimeBuckets-1:
		return Count(from) + " or more"
	case b == 1:
		return "1 to 3"
	}
	return Count(from) + " to " + Count(analysis.BucketStart(b+1)-1)
}

func (t *textReport) timeUnit() uint64 {
	if t.m.Info == nil {
		return 1
	}
	return t.m.Info.TimeUnit
}

// bar draws n out of total as a bar of up to 30 characters.
func bar(n, total uint64) string {
	if total == 0 || n == 0 {
		return ""
	}
	w := int(30 * n / total)
	if w == 0 {
		return "▏"
	}
	return string(slices.Repeat([]rune{'█'}, w))
}

type jsonLifetimes struct {
	TimeUnitNS uint64             `json:"time_unit_ns"`
	Sites      []jsonLifetimeSite `json:"sites"`
}

type jsonLifetimeSite struct {
	StackID        uint64            `json:"stack_id"`
	Freed          uint64            `json:"freed"`            // objects that ended
	MovedByRealloc uint64            `json:"moved_by_realloc"` // blocks a realloc released, moving their object on
	LiveAtEnd      uint64            `json:"live_at_end"`
	ByTime         []jsonLifetimeBin `json:"by_time"`        // lifetimes in ns, in buckets of time units
	ByAllocations  []jsonLifetimeBin `json:"by_allocations"` // allocations in between
	Stack          []jsonFrame       `json:"stack"`
}

// jsonLifetimeBin counts the objects whose lifetime is from From up to
// (not including) To; To is 0 for the last bin, which has no end.
type jsonLifetimeBin struct {
	From    uint64 `json:"from"`
	To      uint64 `json:"to"`
	Objects uint64 `json:"objects"`
}

func lifetimesJSON(c *viewContext) any {
	p := c.p
	sites := lifetimeSites(p)
	sites = sites[:min(len(sites), c.opts.top())]
	list := make([]jsonLifetimeSite, 0, len(sites))
	unit := uint64(1)
	if c.m.Info != nil {
		unit = max(c.m.Info.TimeUnit, 1)
	}
	for _, s := range sites {
		list = append(list, jsonLifetimeSite{StackID: s.Stack, Freed: deaths(s), MovedByRealloc: s.Frees - deaths(s),
			LiveAtEnd: s.InUseAtExitBlocks,
			ByTime:    lifetimeBins(s.Lifetimes[:], unit), ByAllocations: lifetimeBins(s.LifetimeAllocs[:], 1),
			Stack: jsonFrames(p.SiteStack(s))})
	}
	return jsonLifetimes{TimeUnitNS: unit, Sites: list}
}

// lifetimeBins lists the buckets of a lifetime histogram that are not
// empty, their bounds multiplied by scale.
func lifetimeBins(h []uint64, scale uint64) []jsonLifetimeBin {
	bins := []jsonLifetimeBin{}
	for b, n := range h {
		if n == 0 {
			continue
		}
		bin := jsonLifetimeBin{From: scale * analysis.BucketStart(b), Objects: n}
		if b < len(h)-1 {
			bin.To = scale * analysis.BucketStart(b+1)
		}
		bins = append(bins, bin)
	}
	return bins
}

func cmpDesc(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
