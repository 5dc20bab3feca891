package report_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/report"
	"github.com/memtrail/memtrail/internal/trace"
)

// heapViews are the views of the heap over time (threads, objects,
// lifetimes, sizes, timeline), compared with golden files named after
// their input and options:
// testdata/INPUT.view=V[.sort=S][.from=F.to=T].FORMAT.golden.
var heapViews = []struct {
	input    string
	opts     report.Options
	analysis analysis.Options
}{
	{"cache", report.Options{View: "threads"}, analysis.Options{}},
	{"cache", report.Options{View: "objects"}, analysis.Options{}},
	{"cache", report.Options{View: "objects", Objects: report.ByAge}, analysis.Options{}},
	{"cache", report.Options{View: "objects", Objects: report.ByLifetime}, analysis.Options{}},
	{"cache", report.Options{View: "lifetimes"}, analysis.Options{}},
	{"cache", report.Options{View: "sizes"}, analysis.Options{}},
	{"cache", report.Options{View: "timeline"}, analysis.Options{}},
	// The window: from 4 to 8 ms, and the moment 5 ms.
	{"cache", report.Options{View: "timeline"}, analysis.Options{From: 4e6, To: 8e6}},
	{"cache", report.Options{View: "objects"}, analysis.Options{From: 5e6, To: 5e6}},
	{"cache", report.Options{}, analysis.Options{From: 4e6, To: 8e6}},
	// Only the worker's blocks.
	{"cache", report.Options{View: "threads"}, analysis.Options{Threads: []uint64{2}}},
	{"widget", report.Options{View: "lifetimes"}, analysis.Options{}},
	// The heap map at exit and at 5 ms.
	{"cache", report.Options{View: "heapmap"}, analysis.Options{HeapMap: 256}},
	{"cache", report.Options{View: "heapmap"}, analysis.Options{From: 5e6, To: 5e6, HeapMap: 256}},
}

func TestHeapViews(t *testing.T) {
	for _, g := range heapViews {
		m := analyzeWith(t, encode(t, readInput(t, g.input)), g.analysis)
		for _, asJSON := range []bool{false, true} {
			format := map[bool]string{false: "text", true: "json"}[asJSON]
			name := g.input + heapViewSuffix(g.opts, g.analysis) + "." + format
			t.Run(name, func(t *testing.T) {
				var out bytes.Buffer
				if err := report.Write(&out, m, g.opts, asJSON); err != nil {
					t.Fatal(err)
				}
				if asJSON && !json.Valid(out.Bytes()) {
					t.Fatalf("not valid JSON:\n%s", out.Bytes())
				}
				compareGolden(t, filepath.Join("testdata", name+".golden"), out.String())
			})
		}
	}
}

func heapViewSuffix(o report.Options, a analysis.Options) string {
	s := ""
	if o.View != "" {
		s += ".view=" + o.View
	}
	if o.Objects != report.BySize {
		s += ".sort=" + [...]string{"size", "age", "lifetime"}[o.Objects]
	}
	if a.From != 0 || a.To != 0 {
		s += fmt.Sprintf(".from=%d.to=%d", a.From, a.To)
	}
	for _, th := range a.Threads {
		s += fmt.Sprintf(".thread=%d", th)
	}
	return s
}

func analyzeWith(t *testing.T, data []byte, opts analysis.Options) *analysis.Model {
	t.Helper()
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	m, err := analysis.Analyze(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
