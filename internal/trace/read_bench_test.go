package trace

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// BenchmarkReadTrace reads every record of the trace named by
// MEMTRAIL_BENCH_TRACE (for example bench/'s dense workload recorded with
// memtrail run), from memory so that the disk does not count: the
// Reader's cost on a real program's events. Run it with -cpu 1,2 to see
// what a second core adds.
func BenchmarkReadTrace(b *testing.B) {
	data := benchTrace(b)
	events := countTraceEvents(b, data)
	b.Run("next", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			readBench(b, data, events)
		}
		reportEvents(b, events, len(data), cpuTime()-cpu)
	})
}

// benchTrace returns the bytes of the trace named by MEMTRAIL_BENCH_TRACE,
// or skips the benchmark if there is none.
func benchTrace(b *testing.B) []byte {
	path := os.Getenv("MEMTRAIL_BENCH_TRACE")
	if path == "" {
		b.Skip("MEMTRAIL_BENCH_TRACE is not set")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// countTraceEvents returns how many events the trace holds, failing on
// damage: a benchmark of a damaged trace would measure the damage.
func countTraceEvents(b *testing.B, data []byte) int {
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return n
		}
		if err != nil {
			b.Fatal(err)
		}
		if rec.Kind.IsEvent() {
			n++
		}
	}
}
