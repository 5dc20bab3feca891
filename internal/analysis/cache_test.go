package analysis_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace/tracetext"
)

var allFacts = []string{"window", "thread", "bin", "size", "sizecat", "lifetimes", "objects", "timeline"}

// everything writes all a model says, the frames of every site's stack
// included: two models that write the same are the same to every report.
func everything(m *analysis.Model) string {
	var b strings.Builder
	b.WriteString(facts(m, allFacts...))
	for _, p := range m.Processes {
		for i := range p.Sites {
			fmt.Fprintf(&b, "frames %d/%d %v\n", p.ID, p.Sites[i].Stack, p.SiteStack(&p.Sites[i]))
		}
		for _, o := range p.Objects() {
			fmt.Fprintf(&b, "object %+v\n", *o)
		}
		for size := range uint64(4096) {
			if names := p.TypeNames(size); names != nil {
				fmt.Fprintf(&b, "types %d %v\n", size, names)
			}
		}
	}
	return b.String()
}

func writeTextTrace(t *testing.T, dir, file string) string {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data, err := tracetext.Encode(string(text))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, filepath.Base(filepath.Dir(file))+"-"+filepath.Base(file)+".mtr")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCacheRoundTrip analyzes each trace of testdata (and those of the
// report's, which have symbols, inlined frames and forks), then again from
// the cache the first analysis wrote: the two models must say the same.
func TestCacheRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	more, _ := filepath.Glob("../report/testdata/*.txt")
	files = append(files, more...)
	if len(more) == 0 {
		t.Fatal("no traces in ../report/testdata")
	}
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			path := writeTextTrace(t, dir, file)
			first, cached, err := analysis.AnalyzeFile(path, analysis.Options{})
			if err != nil || cached {
				t.Fatalf("first analysis: cached %v, %v", cached, err)
			}
			second, cached, err := analysis.AnalyzeFile(path, analysis.Options{})
			if err != nil || !cached {
				t.Fatalf("second analysis: cached %v, %v", cached, err)
			}
			if a, b := everything(first), everything(second); a != b {
				t.Errorf("the cached model differs (-analyzed +cached):\n%s", lineDiff(a, b))
			}
		})
	}
}

// TestCacheInvalid checks that a cache is used only for the trace it was
// made from, unchanged, and for the same options; and that a damaged or
// unwritable cache costs nothing but the time of an analysis.
func TestCacheInvalid(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	path := writeTextTrace(t, dir, "testdata/objects.txt")
	analyze := func(opts analysis.Options) bool {
		t.Helper()
		_, cached, err := analysis.AnalyzeFile(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		return cached
	}
	analyze(analysis.Options{})
	if !analyze(analysis.Options{}) {
		t.Error("the same analysis again did not come from the cache")
	}
	if analyze(analysis.Options{From: 35000, To: 65000}) {
		t.Error("other options came from the cache")
	}
	if !analyze(analysis.Options{}) || !analyze(analysis.Options{From: 35000, To: 65000}) {
		t.Error("the cache does not keep both analyses")
	}

	// A stack filter: the analysis reads the stacks of an unfiltered one.
	beta := analysis.Options{Filter: analysis.StackFilter{Function: regexp.MustCompile("^beta$")}}
	filtered := writeTextTrace(t, dir, "testdata/filter.txt")
	m, cached, err := analysis.AnalyzeFile(filtered, beta)
	if err != nil || cached || m.Processes[0].Summary.Allocations != 2 {
		t.Fatalf("filtered analysis: cached %v, %v, %+v", cached, err, m)
	}
	if m, cached, _ = analysis.AnalyzeFile(filtered, beta); !cached || m.Processes[0].Summary.Allocations != 2 {
		t.Errorf("filtered analysis again: cached %v, %d allocations", cached, m.Processes[0].Summary.Allocations)
	}

	// The trace changes, its size and time the same.
	data, _ := os.ReadFile(path)
	fi, _ := os.Stat(path)
	changed := append([]byte(nil), data...)
	changed[len(changed)-5] ^= 0xff
	os.WriteFile(path, changed, 0o644)
	os.Chtimes(path, fi.ModTime(), fi.ModTime())
	if _, cached, _ := analysis.AnalyzeFile(path, analysis.Options{}); cached {
		t.Error("a changed trace was read from the cache")
	}
	os.WriteFile(path, data, 0o644)
	analyze(analysis.Options{})

	// A damaged cache is ignored, and replaced.
	os.WriteFile(path+".cache", []byte("memtrail analysis cache\n\x01garbage"), 0o644)
	if analyze(analysis.Options{}) {
		t.Error("a damaged cache was used")
	}
	if !analyze(analysis.Options{}) {
		t.Error("the damaged cache was not replaced")
	}

	// The cache cannot be written beside the trace: it goes to the user's
	// cache directory.
	os.Remove(path + ".cache")
	os.Mkdir(path+".cache", 0o755)
	analyze(analysis.Options{})
	if !analyze(analysis.Options{}) {
		t.Error("no cache in the user's cache directory")
	}
	if matches, _ := filepath.Glob(filepath.Join(os.Getenv("XDG_CACHE_HOME"), "memtrail", "analysis", "*.cache")); len(matches) == 0 {
		t.Error("the user's cache directory holds no cache")
	}
}

// TestFilteredAnalysisReadsWholeTrace analyzes a trace with a filter, from
// no cache, time after time: AnalyzeFile reads the trace twice then (the
// stacks, then the filtered analysis), and the read-ahead of the first
// Reader, which may read on after its analysis ends, must not take what
// the second reads from the file.
func TestFilteredAnalysisReadsWholeTrace(t *testing.T) {
	text, err := os.ReadFile("testdata/filter.txt")
	if err != nil {
		t.Fatal(err)
	}
	// Blocks of a few records each, as a recorded trace has many: the
	// read-ahead reads them in the background.
	data, _ := smallBlocks(t, string(text))
	path := filepath.Join(t.TempDir(), "filter.mtr")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	filter := analysis.StackFilter{Function: regexp.MustCompile(`^beta$`)}
	for i := range 200 {
		os.Remove(path + ".cache")
		m, _, err := analysis.AnalyzeFile(path, analysis.Options{Filter: filter})
		if err != nil {
			t.Fatalf("analysis %d: %v", i+1, err)
		}
		if n := m.Processes[0].Summary.Allocations; n != 2 {
			t.Fatalf("analysis %d: %d allocations, want beta's 2", i+1, n)
		}
	}
}
