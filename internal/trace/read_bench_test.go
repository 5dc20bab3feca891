package trace

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkReadTrace reads every record of the trace named by
// MEMTRAIL_BENCH_TRACE (for example bench/'s dense workload recorded with
// memtrail run), from memory so that the disk does not count: the
// Reader's cost on a real program's events. Run it with -cpu 1,2 to see
// what a second core adds.
func BenchmarkReadTrace(b *testing.B) {
	data := benchTrace(b)
	events := countEventsIn(b, data)
	b.Run("next", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		loopEvents(b, events, len(data), func() { readBench(b, data, events) })
	})
	b.Run("batch", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		loopEvents(b, events, len(data), func() { readBatches(b, data, events) })
	})
}

// BenchmarkReadBusy reads the trace named by MEMTRAIL_BENCH_TRACE with
// NextBatch for a caller that works on every event, as an analysis does:
// for a few nanoseconds, and for about as long as decoding an event
// takes. With a second core, decoding should cost the caller next to
// nothing. (consumer-ns/event is what the caller's work costs alone.)
func BenchmarkReadBusy(b *testing.B) {
	data := benchTrace(b)
	for _, rounds := range []int{8, 32} {
		b.Run(fmt.Sprintf("rounds=%d", rounds), func(b *testing.B) {
			var probe Event
			start := time.Now()
			for range 1 << 20 {
				busySink += busyWork(&probe, rounds)
			}
			alone := float64(time.Since(start).Nanoseconds()) / (1 << 20)
			events := 0
			cpu := cpuTime()
			for b.Loop() {
				r, err := NewReader(bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				for {
					batch, _, err := r.NextBatch()
					if err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
					for i := range batch {
						busySink += busyWork(&batch[i], rounds)
					}
					events += len(batch)
				}
			}
			reportEvents(b, events/b.N, len(data), cpuTime()-cpu)
			b.ReportMetric(alone, "consumer-ns/event")
		})
	}
}

var busySink uint64

// busyWork stands for what a caller does with an event: rounds rounds of
// arithmetic on its fields.
func busyWork(e *Event, rounds int) uint64 {
	x := e.Addr ^ e.Size ^ uint64(e.Handle)
	for range rounds {
		x = x*0x9e3779b97f4a7c15 + 1
		x ^= x >> 29
	}
	return x
}

// readBatches reads a trace of the given number of events with NextBatch.
func readBatches(b *testing.B, data []byte, events int) {
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for {
		batch, _, err := r.NextBatch()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		n += len(batch)
	}
	if n != events {
		b.Fatalf("read %d events, want %d", n, events)
	}
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

// BenchmarkDecodeBlocks decodes the blocks of the trace named by
// MEMTRAIL_BENCH_TRACE, decompressed beforehand, on one goroutine, both
// halves of each batch one after the other: what decoding events costs,
// without reading, decompressing or handing over.
func BenchmarkDecodeBlocks(b *testing.B) {
	data := benchTrace(b)
	src := &source{r: bytes.NewReader(data[fileHeaderSize:]), offset: fileHeaderSize}
	var blocks []fetched
	for {
		f := src.next(nil)
		if f.found {
			blocks = append(blocks, f)
		}
		if f.atEnd || f.err != nil {
			break
		}
	}
	var hint atomic.Uint64
	var out batch
	events := 0
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		events = 0
		for i := range blocks {
			d, a := newBlockDecoder(&blocks[i], uint32(i+1), &hint), newAddressDecoder(&blocks[i])
			for more := true; more; {
				out.reset()
				more = d.fill(&out)
				a.decode(&out)
				events += len(out.events)
				if len(out.others) > 0 && out.others[len(out.others)-1].err != nil {
					b.Fatal(out.others[len(out.others)-1].err)
				}
			}
			a.heaps.recycle()
		}
	}
	reportEvents(b, events, len(data), cpuTime()-cpu)
}
