package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
)

// view is one way to look at a process: a name for the command line, what
// it shows, and how to write it as text and as JSON.
type view struct {
	name  string
	about string
	text  func(t *textReport)
	json  func(c *viewContext) any
}

// viewContext is what a view's JSON is made from.
type viewContext struct {
	m    *analysis.Model
	p    *analysis.Process
	opts Options
}

// views lists the views, the summary first.
func views() []view {
	return []view{
		{"summary", "totals, the peak, the call stacks that weigh most, problems (the default)", nil, nil},
		{"leaks", "blocks never freed, by the last functions of their call stacks (mprof's leak table; -chain)", (*textReport).leaks, jsonLeaksOf},
		{"bins", "allocations by size, 0 to 1024 bytes and larger, with the types of that size (mprof's bins)", (*textReport).bins, jsonBinsOf},
		{"direct", "the functions that called the allocator, with sizes and bytes kept (mprof's direct allocations)", (*textReport).direct, jsonDirectOf},
		{"callgraph", "bytes by function, with callers and callees, cycles merged (mprof's call graph, gprof's layout)", (*textReport).callGraph, jsonCallGraphOf},
		{"top-down", "call tree from main inward, weighed by -cost (heaptrack's top-down tree)", (*textReport).topDown, jsonTopDownOf},
		{"bottom-up", "call tree from the allocating functions outward, weighed by -cost (heaptrack's bottom-up tree)", (*textReport).bottomUp, jsonBottomUpOf},
		{"callers", "each function's cost with and without its callees, its callers and callees, by -cost (heaptrack's caller/callee view)", (*textReport).callers, jsonCallersOf},
		{"threads", "each thread: what it allocated and its own peak", threadsText, threadsJSON},
		{"objects", "the object list: the biggest or oldest objects live at the end, or the longest-lived freed", objectsText, objectsJSON},
		{"lifetimes", "how long the objects of each call stack lived", lifetimesText, lifetimesJSON},
		{"sizes", "the size histogram", sizesText, sizesJSON},
		{"timeline", "the heap and the allocation rate over time", timelineText, timelineJSON},
		{"heapmap", "the address space of the blocks live at the end (or at -at): how full each part of it is", heapMapText, heapMapJSON},
	}
}

// Views returns the names of the views and what each shows, for help
// texts.
func Views() [][2]string {
	var list [][2]string
	for _, v := range views() {
		list = append(list, [2]string{v.name, v.about})
	}
	return list
}

func findView(name string) (view, error) {
	if name == "" {
		name = "summary"
	}
	var names []string
	for _, v := range views() {
		if v.name == name {
			return v, nil
		}
		names = append(names, v.name)
	}
	return view{}, fmt.Errorf("unknown view %q (views: %s)", name, strings.Join(names, ", "))
}

// CheckView returns an error if there is no view of that name.
func CheckView(name string) error {
	_, err := findView(name)
	return err
}

// Write writes the view of opts of one process of m, as JSON if asJSON is
// set, else as text.
func Write(w io.Writer, m *analysis.Model, opts Options, asJSON bool) error {
	v, err := findView(opts.View)
	if err != nil {
		return err
	}
	if v.text == nil {
		if asJSON {
			return JSON(w, m, opts)
		}
		return Text(w, m, opts)
	}
	p, err := pick(m, opts)
	if err != nil {
		return err
	}
	if asJSON {
		c := &viewContext{m: m, p: p, opts: opts}
		return writeJSON(w, jsonView{Program: p.Exe, Args: orEmpty(p.Args), PID: p.PID, View: v.name,
			Window: jsonWindow{FromNS: p.Window.From, ToNS: p.Window.To}, Data: v.json(c), Warnings: orEmpty(m.AllWarnings())})
	}
	t := &textReport{m: m, p: p, opts: opts}
	t.warnings()
	t.header()
	t.window()
	v.text(t)
	_, err = io.WriteString(w, t.b.String())
	return err
}

// jsonView is the JSON of a view other than the summary: the process, the
// window, and the view's own data under "data".
type jsonView struct {
	Program  string     `json:"program"`
	Args     []string   `json:"args"`
	PID      uint64     `json:"pid"`
	View     string     `json:"view"`
	Window   jsonWindow `json:"window"`
	Data     any        `json:"data"`
	Warnings []string   `json:"warnings"`
}

// jsonWindow is the part of the run a report covers, in ns after the
// process started.
type jsonWindow struct {
	FromNS uint64 `json:"from_ns"`
	ToNS   uint64 `json:"to_ns"`
}

// writeJSON writes v as indented JSON, with no HTML escapes.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// windowed reports whether the report covers only part of the run.
func (t *textReport) windowed() bool {
	return t.p.Window.From != 0 || t.p.Window.To < t.p.RunTime()
}

// endLabel names the end of what the report covers: "at exit", or "at
// 5.00 ms" when a window ends before the process did.
func (t *textReport) endLabel() string {
	if t.p.Window.To < t.p.RunTime() {
		return "at " + Duration(t.p.Window.To)
	}
	return "at exit"
}

// window says which part of the run the report covers, if not all of it.
func (t *textReport) window() {
	p := t.p
	if !t.windowed() {
		return
	}
	if p.Window.From == p.Window.To {
		t.printf("at %s after start\n", Duration(p.Window.From))
		return
	}
	t.printf("from %s to %s after start\n", Duration(p.Window.From), Duration(p.Window.To))
}
