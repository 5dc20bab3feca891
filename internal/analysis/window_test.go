package analysis

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
	"github.com/memtrail/memtrail/internal/trace/tracetext"
)

// TestWindowStopsEarly analyzes windows of every test trace twice: reading
// the whole trace, and stopping at the end of the window with the rest
// taken from an analysis of the whole trace (Options.Stacks). The models
// must be the same, and the second must stop early where it can.
func TestWindowStopsEarly(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatal("no test traces", err)
	}
	stopped := 0
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		data, err := tracetext.Encode(string(text))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		analyze := func(opts Options) *Model {
			r, err := trace.NewReader(strings.NewReader(string(data)))
			if err != nil {
				t.Fatal(err)
			}
			m, err := Analyze(r, opts)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		whole := analyze(Options{})
		var run uint64
		for _, p := range whole.Processes {
			run = max(run, p.RunTime())
		}
		for _, w := range [][2]uint64{{0, run / 10}, {0, run / 2}, {run / 4, run / 2}, {run / 2, run / 2}, {0, run - 1}, {0, run + 10}} {
			if w[1] == 0 {
				continue
			}
			// Also with a stack filter, which needs the stacks of the
			// whole trace anyway: a copy of them not marked complete
			// makes the analysis read all.
			readAll := *whole
			readAll.Complete = false
			for _, filter := range []StackFilter{{}, {Function: regexp.MustCompile("main|make")}} {
				opts := Options{From: w[0], To: w[1], Filter: filter}
				if !filter.IsZero() {
					opts.Stacks = &readAll
				}
				read := analyze(opts)
				opts.Stacks = whole
				early := analyze(opts)
				if read.stopped {
					t.Fatalf("%s: the analysis given an incomplete model stopped early", file)
				}
				if early.stopped {
					stopped++
				}
				early.stopped = false
				if !reflect.DeepEqual(cachedModelOf(read), cachedModelOf(early)) {
					t.Errorf("%s, window %d to %d, filter %v: the model stopping at the window's end differs from the one reading all",
						file, w[0], w[1], filterExprs(filter))
				}
			}
		}
	}
	if stopped == 0 {
		t.Error("no analysis stopped at the end of its window")
	}
	t.Logf("%d analyses stopped early", stopped)
}

// TestWindowFromCache analyzes a window of a trace file whose cache holds
// the analysis of the whole trace: it stops at the window's end, with the
// model of reading it all.
func TestWindowFromCache(t *testing.T) {
	text, err := os.ReadFile("testdata/widget.txt")
	if err != nil {
		t.Fatal(err)
	}
	data, err := tracetext.Encode(string(text))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "widget.mtr")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	whole, _, err := AnalyzeFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	window := Options{From: whole.Processes[0].RunTime() / 4, To: whole.Processes[0].RunTime() / 2}
	m, fromCache, err := AnalyzeFile(path, window)
	if err != nil || fromCache || !m.stopped {
		t.Fatalf("the window: %v, from the cache %v, stopped early %v; want it made, stopping early", err, fromCache, m.stopped)
	}
	r, err := trace.NewReader(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	read, err := Analyze(r, window)
	if err != nil {
		t.Fatal(err)
	}
	m.stopped = false
	if !reflect.DeepEqual(cachedModelOf(read), cachedModelOf(m)) {
		t.Error("the window's model differs from the one reading all")
	}
	if again, fromCache, _ := AnalyzeFile(path, window); !fromCache || !reflect.DeepEqual(again.Processes[0].Summary, m.Processes[0].Summary) {
		t.Error("the window's model is not in the cache")
	}
}
