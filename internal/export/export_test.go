package export_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/record"
	"github.com/memtrail/memtrail/internal/trace"
)

// recording is the fixture testdata/heap.c recorded once for all the
// tests of the package, and its analysis.
type recording struct {
	prog  string // the fixture program
	path  string // its trace
	model *analysis.Model
	proc  *analysis.Process
}

var (
	recordOnce sync.Once
	recorded   *recording
	recordErr  string
	recordDir  string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "memtrail-export-test")
	if err != nil {
		panic(err)
	}
	recordDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// heapRecording returns the recording of testdata/heap.c, making it on
// first use.
func heapRecording(t *testing.T) *recording {
	t.Helper()
	recordOnce.Do(func() {
		// If recordHeap fails the test that runs it, the tests after it
		// learn why from its log.
		recordErr = "recording heap.c failed in an earlier test"
		recorded, recordErr = recordHeap(t)
	})
	if recorded == nil {
		t.Fatal(recordErr)
	}
	return recorded
}

func recordHeap(t *testing.T) (*recording, string) {
	prog := fixture.Build(t, filepath.Join("testdata", "heap.c"))
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err.Error()
	}
	defer devNull.Close()
	var log strings.Builder
	res, err := record.Run(record.Options{
		Args: []string{prog}, Output: filepath.Join(recordDir, "heap.mtr"), AgentPath: fixture.Agent(t),
		Stdin: devNull, Stdout: devNull, Stderr: devNull, Log: &log, Version: "test",
		// Fine enough for the phases of the fixture, 5 ms apart, to
		// fall in steps of their own on the timeline.
		TimeUnit: 100 * time.Microsecond,
	})
	if err != nil {
		return nil, "recording heap.c: " + err.Error() + "\n" + log.String()
	}
	if res.WriteErr != nil {
		return nil, "recording heap.c: " + res.WriteErr.Error()
	}
	m, err := analysis.AnalyzeTrace(res.Path, analysis.Options{})
	if err != nil {
		return nil, err.Error()
	}
	if len(m.Processes) != 1 || len(m.Warnings) > 0 {
		return nil, fmt.Sprintf("the recording of heap.c has %d processes, warnings: %q", len(m.Processes), m.Warnings)
	}
	return &recording{prog: prog, path: res.Path, model: m, proc: m.Processes[0]}, ""
}

// openTrace returns a Reader of the trace file at path, closed when the
// test ends.
func openTrace(t *testing.T, path string) *trace.Reader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	r, err := trace.NewReader(bufio.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	return r
}
