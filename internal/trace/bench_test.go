package trace

import (
	"bytes"
	"io"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// benchEvents returns a realistic stream of events: allocations and frees
// of blocks of 8 to 520 bytes at addresses from a pool of 4096 slots, a few
// reallocs, a handful of stacks, and four threads taking turns in runs.
func benchEvents(n int) []Event {
	const slots = 4096
	rng := rand.New(rand.NewPCG(1, 2))
	var live [slots]bool
	events := make([]Event, 0, n)
	var now uint64
	thread := uint64(1)
	for len(events) < n {
		now += uint64(rng.IntN(200))
		if rng.IntN(10) == 0 {
			thread = 1 + uint64(rng.IntN(4))
		}
		slot := rng.IntN(slots)
		e := Event{Process: 1, Thread: thread, Time: now, Addr: 0x5555_5555_0000 + uint64(slot)*528,
			Stack: 1 + uint64(rng.IntN(8))}
		switch {
		case !live[slot]:
			e.Kind, e.API, e.Size = KindAlloc, APIMalloc, 8+uint64(rng.IntN(513))
			live[slot] = true
		case rng.IntN(20) == 0:
			e.Kind, e.API, e.OldAddr, e.Size = KindRealloc, APIRealloc, e.Addr, 8+uint64(rng.IntN(513))
		default:
			e.Kind, e.API = KindFree, APIFree
			live[slot] = false
		}
		events = append(events, e)
	}
	return events
}

func encodeBench(b *testing.B, events []Event, uncompressed bool) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Info{TimeUnit: 1})
	if err != nil {
		b.Fatal(err)
	}
	w.Uncompressed = uncompressed
	for _, e := range events {
		if err := w.Event(e); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

func BenchmarkWriter(b *testing.B) {
	events := benchEvents(1 << 20)
	for _, mode := range []struct {
		name         string
		uncompressed bool
	}{{"raw", true}, {"zstd", false}} {
		b.Run(mode.name, func(b *testing.B) {
			size := len(encodeBench(b, events, mode.uncompressed))
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				w, err := NewWriter(io.Discard, Info{TimeUnit: 1})
				if err != nil {
					b.Fatal(err)
				}
				w.Uncompressed = mode.uncompressed
				for _, e := range events {
					if err := w.Event(e); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			reportEvents(b, len(events), size, cpuTime()-cpu)
		})
	}
}

func BenchmarkReader(b *testing.B) {
	events := benchEvents(1 << 20)
	for _, mode := range []struct {
		name         string
		uncompressed bool
	}{{"raw", true}, {"zstd", false}} {
		b.Run(mode.name, func(b *testing.B) {
			data := encodeBench(b, events, mode.uncompressed)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				r, err := NewReader(bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					rec, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if rec.Kind.IsEvent() {
						n++
					}
				}
				if n != len(events) {
					b.Fatalf("read %d events, want %d", n, len(events))
				}
			}
			reportEvents(b, len(events), len(data), cpuTime()-cpu)
		})
	}
}

// reportEvents reports throughput in events, the size of an event in the
// file, and the CPU time an event costs (on all threads: with compression
// the background goroutines do much of the work). On a busy machine the CPU
// time varies less than the throughput.
func reportEvents(b *testing.B, events, size int, cpu time.Duration) {
	total := float64(events) * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(size)/float64(events), "bytes/event")
	b.ReportMetric(float64(cpu.Nanoseconds())/total, "cpu-ns/event")
	b.ReportMetric(0, "ns/op")
}

// cpuTime returns the CPU time the process has used so far.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
