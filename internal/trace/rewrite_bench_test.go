package trace

import (
	"bytes"
	"io"
	"testing"
)

// BenchmarkRewrite writes again the events of the trace named by
// MEMTRAIL_BENCH_TRACE (for example one of bench/'s workloads recorded
// with memtrail run): the Writer's cost on a real program's events,
// with and without compression.
func BenchmarkRewrite(b *testing.B) {
	r, err := NewReader(bytes.NewReader(benchTrace(b)))
	if err != nil {
		b.Fatal(err)
	}
	var info Info
	events := make([]Event, 0, 4<<20)
	for len(events) < cap(events) {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		if rec.Kind == KindInfo {
			info = *rec.Info
		}
		if rec.Kind.IsEvent() {
			events = append(events, rec.Event)
		}
	}
	for _, raw := range []bool{false, true} {
		name := "zstd"
		if raw {
			name = "raw"
		}
		b.Run(name, func(b *testing.B) {
			rewrite(b, info, len(events), raw, func(emit func(*Event)) {
				for i := range events {
					emit(&events[i])
				}
			})
		})
	}
}

// rewrite measures a Writer of info, compressing unless raw, writing the n
// events gen emits, and reports their cost and size.
func rewrite(b *testing.B, info Info, n int, raw bool, gen func(emit func(*Event))) {
	b.ReportAllocs()
	gen(func(*Event) {}) // the events are made before the clock starts
	var size int64
	cpu := cpuTime()
	for b.Loop() {
		var cw countingWriter
		w, err := NewWriter(&cw, info)
		if err != nil {
			b.Fatal(err)
		}
		w.Uncompressed = raw
		gen(func(e *Event) {
			if err := w.EventAt(e); err != nil {
				b.Fatal(err)
			}
		})
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		size = cw.n
	}
	reportEvents(b, n, int(size), cpuTime()-cpu)
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }
