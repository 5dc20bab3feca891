package report_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/report"
)

var (
	allocated = analysis.CostAllocated
	leaked    = analysis.CostLeaked
)

// viewGoldens are the views compared with files of testdata, named after
// their input, their options (a stack filter's analyzes the input with
// it) and their format: testdata/INPUT.VIEW[.OPTIONS].FORMAT.golden.
var viewGoldens = []struct {
	input  string
	opts   report.Options
	filter analysis.StackFilter
}{
	// The widgets of mprof's paper: its four tables, and heaptrack's views.
	{input: "widget", opts: report.Options{View: "leaks"}},
	{input: "widget", opts: report.Options{View: "leaks", Chain: 1}},
	{input: "widget", opts: report.Options{View: "leaks", Chain: 2}},
	{input: "widget", opts: report.Options{View: "bins"}},
	{input: "widget", opts: report.Options{View: "direct"}},
	{input: "widget", opts: report.Options{View: "callgraph"}},
	{input: "widget", opts: report.Options{View: "top-down"}},
	{input: "widget", opts: report.Options{View: "top-down", Cost: leaked}},
	{input: "widget", opts: report.Options{View: "bottom-up", Cost: allocated}},
	{input: "widget", opts: report.Options{View: "callers", Cost: allocated}},
	{input: "widget", opts: report.Options{View: "leaks"}, filter: analysis.StackFilter{Function: regexp.MustCompile("blue")}},
	{input: "widget", opts: report.Options{View: "direct"}, filter: analysis.StackFilter{Ignore: regexp.MustCompile("red")}},
	{input: "widget", opts: report.Options{View: "bins"}, filter: analysis.StackFilter{Function: regexp.MustCompile("blue")}},
	// The paper's run, 10,000 widgets: its figures 2 to 5.
	{input: "widget-10000", opts: report.Options{View: "leaks"}},
	{input: "widget-10000", opts: report.Options{View: "bins"}},
	{input: "widget-10000", opts: report.Options{View: "direct"}},
	{input: "widget-10000", opts: report.Options{View: "callgraph"}},
	// Direct and mutual recursion: a cycle, entered from two callers.
	{input: "recursion", opts: report.Options{View: "callgraph"}},
	{input: "recursion", opts: report.Options{View: "leaks"}},
	{input: "recursion", opts: report.Options{View: "direct"}},
	{input: "recursion", opts: report.Options{View: "top-down", Cost: allocated}},
	{input: "recursion", opts: report.Options{View: "top-down", Cost: allocated, Top: 1, Frames: 3}},
	{input: "recursion", opts: report.Options{View: "bottom-up", Cost: allocated}},
	{input: "recursion", opts: report.Options{View: "callers", Cost: allocated}},
	{input: "recursion", opts: report.Options{View: "callers", Cost: allocated, Top: 2}},
	{input: "recursion", opts: report.Options{View: "callgraph"}, filter: analysis.StackFilter{Function: regexp.MustCompile("^load$")}},
	// Inlined frames.
	{input: "inlined", opts: report.Options{View: "direct"}},
	{input: "inlined", opts: report.Options{View: "leaks"}},
	{input: "inlined", opts: report.Options{View: "callgraph"}},
	{input: "inlined", opts: report.Options{View: "top-down", Cost: allocated}},
	{input: "inlined", opts: report.Options{View: "bottom-up", Cost: allocated}},
	{input: "inlined", opts: report.Options{View: "callers", Cost: allocated}},
	// A bit of everything: stacks without symbols, deep recursion, an
	// inherited heap, and filters of each kind.
	{input: "server", opts: report.Options{View: "callgraph"}},
	{input: "server", opts: report.Options{View: "top-down", Cost: allocated}},
	{input: "server", opts: report.Options{View: "bottom-up", Cost: analysis.CostPeak}},
	{input: "server", opts: report.Options{View: "callers", Cost: analysis.CostTemporary}},
	{input: "server", opts: report.Options{View: "leaks", PID: 301}},
	{input: "server", opts: report.Options{View: "top-down", Cost: allocated}, filter: analysis.StackFilter{File: regexp.MustCompile("cache")}},
	{input: "server", opts: report.Options{View: "direct"}, filter: analysis.StackFilter{Module: regexp.MustCompile("libfilter")}},
	{input: "server", opts: report.Options{View: "callgraph"}, filter: analysis.StackFilter{Ignore: regexp.MustCompile("walk")}},
}

func TestViewGoldens(t *testing.T) {
	models := make(map[string]*analysis.Model)
	for _, g := range viewGoldens {
		m, ok := models[g.input]
		if !ok {
			m = input(t, g.input)
			models[g.input] = m
		}
		if !g.filter.IsZero() {
			m = analyzeWith(t, encode(t, readInput(t, g.input)), analysis.Options{Filter: g.filter, Stacks: m})
		}
		for _, format := range []string{"text", "json"} {
			name := g.input + viewSuffix(g.opts, g.filter) + "." + format
			t.Run(name, func(t *testing.T) {
				var out bytes.Buffer
				if err := report.Write(&out, m, g.opts, format == "json"); err != nil {
					t.Fatal(err)
				}
				if format == "json" && !json.Valid(out.Bytes()) {
					t.Fatalf("not valid JSON:\n%s", out.Bytes())
				}
				compareGolden(t, filepath.Join("testdata", name+".golden"), out.String())
			})
		}
	}
}

// viewSuffix names the options of a view's golden file.
func viewSuffix(o report.Options, filter analysis.StackFilter) string {
	s := "." + o.View + optionsSuffix(o)
	if o.Cost != 0 {
		s += ".cost=" + o.Cost.String()
	}
	if o.Chain != 0 {
		s += fmt.Sprintf(".chain=%d", o.Chain)
	}
	for _, f := range filter.Fields() {
		s += "." + f.Name + "=" + regexp.MustCompile(`[^a-z0-9_]`).ReplaceAllString(f.Expr.String(), "")
	}
	return s
}

// Every view has a text and a JSON form whose lists are never null.
func TestViewsHaveNoNulls(t *testing.T) {
	m := analyzeEmptyProcess(t)
	for _, v := range report.Views() {
		if v[0] == "summary" {
			continue
		}
		var out bytes.Buffer
		if err := report.Write(&out, m, report.Options{View: v[0]}, true); err != nil {
			t.Fatalf("%s: %v", v[0], err)
		}
		if bytes.Contains(out.Bytes(), []byte("null")) {
			t.Errorf("%s: JSON has a null:\n%s", v[0], out.Bytes())
		}
		out.Reset()
		if err := report.Write(&out, m, report.Options{View: v[0]}, false); err != nil {
			t.Fatalf("%s: %v", v[0], err)
		}
		if !bytes.Contains(out.Bytes(), []byte("  none\n")) {
			t.Errorf("%s: the text of a process that allocated nothing does not say none:\n%s", v[0], out.Bytes())
		}
	}
}

// analyzeEmptyProcess returns the model of a trace of a process that
// allocated nothing.
func analyzeEmptyProcess(t *testing.T) *analysis.Model {
	return analyze(t, encode(t, `
info time-unit=1
process id=1 pid=100 exe=/bin/true args=[true]
process-end id=1 time=10 how=exited
end time=10 events=0
`))
}
