package export_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/export"
	"github.com/memtrail/memtrail/internal/trace"
)

// exportParquet exports the trace at path, with its model m, into dir.
func exportParquet(t *testing.T, path string, m *analysis.Model, dir string) export.ParquetCounts {
	t.Helper()
	r := openTrace(t, path)
	events, err := os.Create(filepath.Join(dir, "events.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	stacks, err := os.Create(filepath.Join(dir, "stacks.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	defer stacks.Close()
	counts, err := export.Parquet(events, stacks, r, m, 0)
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

// readmeQuery is the example of README.md: where the bytes were
// allocated, by the frame that called the allocator.
const readmeQuery = `SELECT s.function, s.file, s.line, count(*) AS allocations, sum(e.size) AS bytes
FROM 'events.parquet' e
JOIN 'stacks.parquet' s ON s.process = e.process AND s.stack_id = e.stack_id AND s.depth = 0
WHERE e.kind IN ('alloc', 'realloc')
GROUP BY ALL ORDER BY bytes DESC LIMIT 10`

// TestParquetDuckDB exports the recording as Parquet and queries it with
// DuckDB, a reader that shares nothing with the writer: the events must
// be those the analysis counted, and the stacks those of the fixture.
func TestParquetDuckDB(t *testing.T) {
	rec := heapRecording(t)
	dir := t.TempDir()
	counts := exportParquet(t, rec.path, rec.model, dir)
	s := rec.proc.Summary

	results := duckDB(t, dir,
		`SELECT count(*) AS n FROM 'events.parquet'`,
		`SELECT kind, count(*) AS n, sum(size) AS bytes, count(old_address) AS moved FROM 'events.parquet' GROUP BY kind`,
		`SELECT count(*) AS n FROM 'stacks.parquet'`,
		// Every event with a stack finds its frames.
		`SELECT count(*) AS n FROM 'events.parquet' e WHERE e.stack_id <> 0 AND NOT EXISTS
			(SELECT 1 FROM 'stacks.parquet' s WHERE s.process = e.process AND s.stack_id = e.stack_id)`,
		readmeQuery,
	)
	if n := number(t, results[0][0]["n"]); n != uint64(counts.Events) {
		t.Errorf("DuckDB reads %d events, the export says it wrote %d", n, counts.Events)
	}
	byKind := make(map[string]map[string]any)
	for _, row := range results[1] {
		byKind[row["kind"].(string)] = row
	}
	allocs, frees, reallocs := number(t, byKind["alloc"]["n"]), number(t, byKind["free"]["n"]), number(t, byKind["realloc"]["n"])
	// A realloc is an allocation and a free, as the analysis counts
	// them (the fixture's reallocs are of live blocks).
	if allocs+reallocs != s.Allocations || frees+reallocs != s.Frees+s.InvalidFrees {
		t.Errorf("events: %d allocs, %d frees, %d reallocs; the analysis counts %d allocations and %d frees (%d invalid)",
			allocs, frees, reallocs, s.Allocations, s.Frees, s.InvalidFrees)
	}
	if rows := allocs + frees + reallocs; rows != uint64(counts.Events) {
		t.Errorf("%d events by kind, %d in all", rows, counts.Events)
	}
	if reallocs != 2 || number(t, byKind["realloc"]["moved"]) != 2 || number(t, byKind["alloc"]["moved"]) != 0 {
		t.Errorf("heap.c makes 2 reallocs, each with an old address: %v", byKind)
	}
	if bytes := number(t, byKind["alloc"]["bytes"]) + number(t, byKind["realloc"]["bytes"]); bytes != s.BytesAllocated {
		t.Errorf("the sizes of the allocations add up to %d bytes, the analysis says %d were allocated", bytes, s.BytesAllocated)
	}
	if n := number(t, results[2][0]["n"]); n != uint64(counts.Frames) || n == 0 {
		t.Errorf("DuckDB reads %d frames, the export says it wrote %d", n, counts.Frames)
	}
	if n := number(t, results[3][0]["n"]); n != 0 {
		t.Errorf("%d events have a stack without frames", n)
	}
	top := results[4]
	if len(top) == 0 || top[0]["function"] != "new_row" || number(t, top[0]["bytes"]) != 200*4096 ||
		number(t, top[0]["allocations"]) != 200 || !strings.HasSuffix(top[0]["file"].(string), "heap.c") {
		t.Errorf("README's query: %v; heap.c allocates most, 200 rows of 4096 bytes, in new_row", top)
	}
}

// number reads a number of DuckDB's JSON, which writes its big integers
// as strings.
func number(t *testing.T, v any) uint64 {
	t.Helper()
	switch v := v.(type) {
	case string:
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%q is no number", v)
		}
		return n
	case float64:
		return uint64(v)
	case nil:
		return 0
	}
	t.Fatalf("%v (%T) is no number", v, v)
	return 0
}

var duckDBInstall sync.Mutex

// duckDB runs the SQL statements with DuckDB in dir and returns the rows
// of each. DuckDB comes from npm, pinned in testdata/duckdb: .ci/run
// installs it, and so does the first test that needs it.
func duckDB(t *testing.T, dir string, statements ...string) [][]map[string]any {
	t.Helper()
	pkg, err := filepath.Abs(filepath.Join("testdata", "duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	duckDBInstall.Lock()
	if _, err := os.Stat(filepath.Join(pkg, "node_modules", "@duckdb", "node-api")); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = pkg
		if out, err := cmd.CombinedOutput(); err != nil {
			duckDBInstall.Unlock()
			t.Fatalf("installing DuckDB, the Parquet reader of this test, with npm ci in %s: %v\n%s", pkg, err, out)
		}
	}
	duckDBInstall.Unlock()
	cmd := exec.Command("node", append([]string{filepath.Join(pkg, "query.mjs")}, statements...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("DuckDB: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(statements) {
		t.Fatalf("DuckDB answered %d statements of %d:\n%s", len(lines), len(statements), out)
	}
	results := make([][]map[string]any, len(lines))
	for i, line := range lines {
		if err := json.Unmarshal([]byte(line), &results[i]); err != nil {
			t.Fatalf("DuckDB's answer to %s: %v\n%s", statements[i], err, line)
		}
	}
	return results
}

// TestParquetStreams exports a trace of two million events and watches
// the heap meanwhile: the export must not hold the events. What it holds
// whatever the trace (the trace reader's buffers, the Parquet writer's
// pages and zstd encoders) comes to about 50 MiB; two million rows would
// take more than 200.
func TestParquetStreams(t *testing.T) {
	const pairs = 1_000_000
	path := filepath.Join(t.TempDir(), "big.mtr")
	writeBigTrace(t, path, pairs)
	m, err := analysis.AnalyzeTrace(path, analysis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := openTrace(t, path)

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := make(chan uint64)
	done := make(chan struct{})
	go func() {
		var most uint64
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			most = max(most, ms.HeapInuse)
			select {
			case <-done:
				peak <- most
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	dir := t.TempDir()
	events, err := os.Create(filepath.Join(dir, "events.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	counts, err := export.Parquet(events, io.Discard, r, m, 0)
	close(done)
	grew := int64(<-peak) - int64(before.HeapInuse)
	if err != nil {
		t.Fatal(err)
	}
	if counts.Events != 2*pairs {
		t.Fatalf("%d events exported, the trace has %d", counts.Events, 2*pairs)
	}
	held := int64(unsafe.Sizeof(export.EventRow{})) * counts.Events
	t.Logf("the heap grew by %.1f MiB while %d events were exported (holding them would take %.1f MiB)",
		float64(grew)/(1<<20), counts.Events, float64(held)/(1<<20))
	if grew > held/2 {
		t.Errorf("the heap grew by %.1f MiB while %d events were exported, as if they were held (%.1f MiB)",
			float64(grew)/(1<<20), counts.Events, float64(held)/(1<<20))
	}
	// The writer keeps the pages of a row group until it is complete:
	// the events must come in many.
	groups := duckDB(t, dir, `SELECT count(DISTINCT row_group_id) AS groups, max(row_group_num_rows) AS most
		FROM parquet_metadata('events.parquet')`)[0][0]
	if n, most := number(t, groups["groups"]), number(t, groups["most"]); n < 8 || most > uint64(counts.Events)/8 {
		t.Errorf("%d events in %d row groups of at most %d rows: the writer held too many at a time", counts.Events, n, most)
	}
}

// writeBigTrace writes a trace of one process that allocates and frees
// a block pairs times, from a few call stacks.
func writeBigTrace(t *testing.T, path string, pairs int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	w, err := trace.NewWriter(bw, trace.Info{TimeUnit: 1000, Command: []string{"big"}})
	if err != nil {
		t.Fatal(err)
	}
	check := func(err error) {
		if err != nil {
			t.Helper()
			t.Fatal(err)
		}
	}
	check(w.ProcessStart(trace.Process{ID: 1, PID: 7, Exe: "/big", Args: []string{"big"}}))
	check(w.Thread(trace.Thread{Process: 1, Index: 1, TID: 7}))
	check(w.Object(trace.Object{ID: 1, Path: "/big"}))
	check(w.Module(trace.Module{Process: 1, ID: 1, Object: 1, Base: 0x400000}))
	for id := uint64(1); id <= 4; id++ {
		check(w.StackNode(trace.StackNode{Process: 1, ID: id, Parent: id / 2, Module: 1, Offset: 0x1000 + id}))
	}
	for i := range pairs {
		addr := 0x10000 + uint64(i%1000)*64
		now := uint64(i) * 1000
		stack := uint64(2 + i%3)
		check(w.Event(trace.Event{Kind: trace.KindAlloc, API: trace.APIMalloc, Process: 1, Thread: 1, Time: now,
			Addr: addr, Size: uint64(16 + i%48), Stack: stack}))
		check(w.Event(trace.Event{Kind: trace.KindFree, API: trace.APIFree, Process: 1, Thread: 1, Time: now,
			Addr: addr, Stack: 1}))
	}
	check(w.ProcessEnd(trace.ProcessEnd{ID: 1, Time: uint64(pairs) * 1000, How: trace.EndExited}))
	check(w.Close())
	check(bw.Flush())
}
