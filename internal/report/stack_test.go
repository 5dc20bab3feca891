package report_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/report"
	"github.com/memtrail/memtrail/internal/stackdepth"
)

// TestStackReports writes the text and JSON reports of memtrail stack on
// stackdepth's testdata/chain.c: main's worst case is unbounded (it
// recurses), its deepest chain has four functions, and what the bound
// leaves out names the recursion, the call through a pointer and printf.
func TestStackReports(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("..", "stackdepth", "testdata", "chain.c"))
	a, err := stackdepth.Analyze(prog, stackdepth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	main := a.Lookup("main")
	if main == nil {
		t.Fatal("no main in chain.c")
	}
	opts := report.StackOptions{Entries: []*stackdepth.Function{main}, Top: 3}
	var text bytes.Buffer
	if err := report.WriteStackText(&text, a, opts); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Worst case from main: unbounded", "recurse (chain.c:", "call_pointer (chain.c:", "printf, from main", "Largest frames:"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("no %q in\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := report.WriteStackJSON(&js, a, opts); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Entries []struct {
			Chain    []struct{ Function string }
			External map[string]int `json:"external_calls"`
		}
		Functions []struct{ Name string }
	}
	if err := json.Unmarshal(js.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Entries) != 1 || len(rep.Entries[0].Chain) != 4 || rep.Entries[0].External["printf"] != 1 || len(rep.Functions) != 3 {
		t.Errorf("JSON report %s", js.String())
	}
}
