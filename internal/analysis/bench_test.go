package analysis_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace"
	"github.com/memtrail/memtrail/internal/trace/tracetext"
)

// churnTrace returns a trace of n events of one process that keeps about
// live blocks live, allocated from 64 stacks and freed in a scrambled
// order, as a busy program does.
func churnTrace(tb testing.TB, n, live int) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Info{TimeUnit: 1})
	if err != nil {
		tb.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	must(w.ProcessStart(trace.Process{ID: 1, PID: 100}))
	for i := uint64(1); i <= 64; i++ {
		must(w.StackNode(trace.StackNode{Process: 1, ID: i, Parent: i / 2, Module: 1, Offset: i * 16}))
	}
	slot := func(i int) uint64 { return 0x10000 + uint64(i*7919%live)*64 }
	for i := range n / 2 {
		addr := slot(i)
		if i >= live {
			must(w.Event(trace.Event{Kind: trace.KindFree, Process: 1, Thread: 1, Time: uint64(2 * i),
				API: trace.APIFree, Addr: addr, Stack: 3}))
		}
		must(w.Event(trace.Event{Kind: trace.KindAlloc, Process: 1, Thread: 1, Time: uint64(2*i + 1),
			API: trace.APIMalloc, Addr: addr, Size: uint64(16 + i%512), Stack: uint64(1 + i%64)}))
	}
	must(w.Close())
	return buf.Bytes()
}

func BenchmarkAnalyze(b *testing.B) {
	const events = 1_000_000
	data := churnTrace(b, events, 50_000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := trace.NewReader(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := analysis.Analyze(r, analysis.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// FuzzAnalyze checks that no trace the Reader accepts makes Analyze fail
// or panic, however damaged or nonsensical.
func FuzzAnalyze(f *testing.F) {
	for _, name := range []string{"widget", "multi", "double-free", "realloc", "mismatch"} {
		text, err := os.ReadFile("testdata/" + name + ".txt")
		if err != nil {
			f.Fatal(err)
		}
		data, err := tracetext.Encode(string(text))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := trace.NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		m, err := analysis.Analyze(r, analysis.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m.Processes {
			for _, s := range p.Sites {
				p.Stack(s.Stack)
			}
		}
	})
}
