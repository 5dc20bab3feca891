package export_test

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/export"
)

// collapsedLine is a line as flamegraph.pl reads it: the stack, then
// white space and a number at the end.
var collapsedLine = regexp.MustCompile(`^(.*)\s+?(\d+(?:\.\d*)?)$`)

// TestCollapsed checks, for every cost, that the collapsed stacks read as
// flamegraph.pl reads them add up to the cost of all the sites, and that
// the fixture's stacks are there, outermost frame first.
func TestCollapsed(t *testing.T) {
	rec := heapRecording(t)
	p := rec.proc
	for _, name := range []string{"allocations", "allocated", "peak", "leaked", "temporary"} {
		t.Run(name, func(t *testing.T) {
			cost, err := analysis.ParseCost(name)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := export.Collapsed(&out, p, cost); err != nil {
				t.Fatal(err)
			}
			stacks := readCollapsed(t, out.String())
			var sum, want uint64
			for _, v := range stacks {
				sum += v
			}
			for _, s := range p.SiteList() {
				want += cost.Of(s)
			}
			if sum != want {
				t.Errorf("the stacks add up to %d, the sites to %d:\n%s", sum, want, out.String())
			}
		})
	}
	var out bytes.Buffer
	if err := export.Collapsed(&out, p, analysis.CostAllocated); err != nil {
		t.Fatal(err)
	}
	stacks := readCollapsed(t, out.String())
	for stack, bytes := range map[string]uint64{
		"main;build_table;new_row": 200 * 4096,
		"main;leak_some":           10 * 1000,
		"main;churn":               1000 * 64,
		"main;grow":                100 + 200 + 400000,
	} {
		if stacks[stack] != bytes {
			t.Errorf("stack %s: %d bytes allocated, heap.c allocates %d there:\n%s", stack, stacks[stack], bytes, out.String())
		}
	}
}

// readCollapsed reads collapsed stacks, adding up the values of a stack
// that comes more than once, as flamegraph.pl does.
func readCollapsed(t *testing.T, text string) map[string]uint64 {
	t.Helper()
	stacks := make(map[string]uint64)
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		m := collapsedLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("line %d, %q, is no collapsed stack", i+1, line)
		}
		v, err := strconv.ParseUint(m[2], 10, 64)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		for _, frame := range strings.Split(m[1], ";") {
			if frame == "" {
				t.Errorf("line %d, %q, has an empty frame", i+1, line)
			}
		}
		stacks[m[1]] += v
	}
	return stacks
}
