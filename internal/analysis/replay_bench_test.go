package analysis

import (
	"errors"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
)

// BenchmarkReplay replays the trace named by MEMTRAIL_BENCH_TRACE (for
// example bench/'s dense workload recorded with memtrail run), read into
// memory beforehand: the replay's own cost per event, on one goroutine,
// without decoding. At most its first 8 million events are kept.
func BenchmarkReplay(b *testing.B) {
	path := os.Getenv("MEMTRAIL_BENCH_TRACE")
	if path == "" {
		b.Skip("MEMTRAIL_BENCH_TRACE is not set")
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	// The trace as the analyzer takes it: batches of events, or a record.
	type item struct {
		events []trace.Event
		rec    trace.Record
	}
	var items []item
	n := 0
	for n < 8_000_000 {
		events, rec, err := r.NextBatch()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		if len(events) > 0 {
			items = append(items, item{events: slices.Clone(events)})
			n += len(events)
		} else {
			items = append(items, item{rec: rec})
		}
	}
	b.ResetTimer()
	for b.Loop() {
		a := newAnalyzer(Options{})
		for _, it := range items {
			if it.events == nil {
				a.record(it.rec)
				continue
			}
			a.events(it.events)
		}
		a.finish()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n)/float64(b.N), "ns/event")
}
