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
// their input, their options and their format:
// testdata/INPUT.VIEW[.OPTIONS].FORMAT.golden.
var viewGoldens = []struct {
	input string
	opts  report.Options
}{
	// The widgets of mprof's paper: its four tables, and heaptrack's views.
	{"widget", report.Options{View: "leaks"}},
	{"widget", report.Options{View: "leaks", Chain: 1}},
	{"widget", report.Options{View: "leaks", Chain: 2}},
	{"widget", report.Options{View: "bins"}},
	{"widget", report.Options{View: "direct"}},
	{"widget", report.Options{View: "callgraph"}},
	{"widget", report.Options{View: "top-down"}},
	{"widget", report.Options{View: "top-down", Cost: leaked}},
	{"widget", report.Options{View: "bottom-up", Cost: allocated}},
	{"widget", report.Options{View: "callers", Cost: allocated}},
	{"widget", report.Options{View: "leaks", Filter: analysis.StackFilter{Function: regexp.MustCompile("blue")}}},
	{"widget", report.Options{View: "direct", Filter: analysis.StackFilter{Ignore: regexp.MustCompile("red")}}},
	{"widget", report.Options{View: "bins", Filter: analysis.StackFilter{Function: regexp.MustCompile("blue")}}},
	// The paper's run, 10,000 widgets: its figures 2 to 5.
	{"widget-10000", report.Options{View: "leaks"}},
	{"widget-10000", report.Options{View: "bins"}},
	{"widget-10000", report.Options{View: "direct"}},
	{"widget-10000", report.Options{View: "callgraph"}},
	// Direct and mutual recursion: a cycle, entered from two callers.
	{"recursion", report.Options{View: "callgraph"}},
	{"recursion", report.Options{View: "leaks"}},
	{"recursion", report.Options{View: "direct"}},
	{"recursion", report.Options{View: "top-down", Cost: allocated}},
	{"recursion", report.Options{View: "top-down", Cost: allocated, Top: 1, Frames: 3}},
	{"recursion", report.Options{View: "bottom-up", Cost: allocated}},
	{"recursion", report.Options{View: "callers", Cost: allocated}},
	{"recursion", report.Options{View: "callers", Cost: allocated, Top: 2}},
	{"recursion", report.Options{View: "callgraph", Filter: analysis.StackFilter{Function: regexp.MustCompile("^load$")}}},
	// Inlined frames.
	{"inlined", report.Options{View: "direct"}},
	{"inlined", report.Options{View: "leaks"}},
	{"inlined", report.Options{View: "callgraph"}},
	{"inlined", report.Options{View: "top-down", Cost: allocated}},
	{"inlined", report.Options{View: "bottom-up", Cost: allocated}},
	{"inlined", report.Options{View: "callers", Cost: allocated}},
	// A bit of everything: stacks without symbols, deep recursion, an
	// inherited heap, and filters of each kind.
	{"server", report.Options{View: "callgraph"}},
	{"server", report.Options{View: "top-down", Cost: allocated}},
	{"server", report.Options{View: "bottom-up", Cost: analysis.CostPeak}},
	{"server", report.Options{View: "callers", Cost: analysis.CostTemporary}},
	{"server", report.Options{View: "leaks", PID: 301}},
	{"server", report.Options{View: "top-down", Cost: allocated, Filter: analysis.StackFilter{File: regexp.MustCompile("cache")}}},
	{"server", report.Options{View: "direct", Filter: analysis.StackFilter{Module: regexp.MustCompile("libfilter")}}},
	{"server", report.Options{View: "callgraph", Filter: analysis.StackFilter{Ignore: regexp.MustCompile("walk")}}},
}

func TestViewGoldens(t *testing.T) {
	models := make(map[string]*analysis.Model)
	for _, g := range viewGoldens {
		m, ok := models[g.input]
		if !ok {
			m = input(t, g.input)
			models[g.input] = m
		}
		for _, format := range []string{"text", "json"} {
			name := g.input + viewSuffix(g.opts) + "." + format
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
func viewSuffix(o report.Options) string {
	s := "." + o.View + optionsSuffix(o)
	if o.Cost != 0 {
		s += ".cost=" + o.Cost.String()
	}
	if o.Chain != 0 {
		s += fmt.Sprintf(".chain=%d", o.Chain)
	}
	for _, f := range []struct {
		name string
		re   *regexp.Regexp
	}{{"function", o.Filter.Function}, {"file", o.Filter.File}, {"module", o.Filter.Module}, {"ignore", o.Filter.Ignore}} {
		if f.re != nil {
			s += "." + f.name + "=" + regexp.MustCompile(`[^a-z0-9_]`).ReplaceAllString(f.re.String(), "")
		}
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
