package demo_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/demo"
	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/record"
)

// TestWidgetLeaks records the widget program and checks that mprof's leak
// table of it is the paper's: one chain, main > make_red_widget >
// make_widget, with 5,019 blocks of 204 bytes never freed; and that its
// bins table names the widget type in the bin of its size, from the
// program's DWARF.
func TestWidgetLeaks(t *testing.T) {
	dir := t.TempDir()
	prog, err := demo.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	var log strings.Builder
	res, err := record.Run(record.Options{
		Args: []string{prog}, Output: filepath.Join(dir, "widget.mtr"), AgentPath: fixture.Agent(t),
		Stdin: devNull, Log: &log, Version: "test",
	})
	if err != nil {
		t.Fatalf("recording the widgets: %v\n%s", err, log.String())
	}
	if res.WriteErr != nil {
		t.Fatalf("recording the widgets: %v", res.WriteErr)
	}
	p := analyzeFile(t, res.Path)

	chains := p.LeakTable(p.SiteList(), analysis.DefaultChain)
	if len(chains) == 0 {
		t.Fatal("no leaks")
	}
	c := chains[0]
	if got, want := strings.Join(c.Functions, " > "), "main > make_red_widget > make_widget"; got != want || c.Truncated {
		t.Errorf("first chain %q (truncated: %t), want %q", got, c.Truncated, want)
	}
	if c.KeptBlocks != 5019 || c.KeptBytes != 1023876 || c.Allocations != 5019 || c.Frees != 0 {
		t.Errorf("first chain: %d allocations, %d frees, %d bytes in %d blocks kept; want 5,019, 0, 1,023,876 in 5,019",
			c.Allocations, c.Frees, c.KeptBytes, c.KeptBlocks)
	}

	bins := p.BinTable(p.TypeNames)
	var widgets *analysis.BinRow
	for i := range bins.Rows {
		if r := &bins.Rows[i]; r.Size == 204 && !r.Larger {
			widgets = r
		}
	}
	if widgets == nil {
		t.Fatalf("no bin of 204 bytes: %+v", bins.Rows)
	}
	if widgets.Allocations != 10000 || widgets.Frees != 4981 || !slices.Equal(widgets.Types, []string{"widget"}) {
		t.Errorf("the bin of 204 bytes: %d allocations, %d frees, types %q; want 10,000, 4,981, [widget]",
			widgets.Allocations, widgets.Frees, widgets.Types)
	}
}

func analyzeFile(t *testing.T, path string) *analysis.Process {
	t.Helper()
	m, _, err := analysis.AnalyzeFile(path, analysis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Processes {
		if filepath.Base(p.Exe) == "widget" {
			return p
		}
	}
	t.Fatalf("no widget process in the trace: %d processes", len(m.Processes))
	return nil
}
