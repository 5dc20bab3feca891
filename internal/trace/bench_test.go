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

// mallocDenseEvents returns the events of a malloc-dense loop as glibc
// would serve it: 4096 slots are filled, then again and again a random slot
// is freed and refilled by a malloc of 8 to 520 bytes. Freed chunks go on a
// LIFO list per chunk size, as in glibc's tcache, and a malloc reuses the
// most recently freed chunk of its size if there is one, else it carves a
// new chunk from the top of the heap. Mallocs and frees each have their
// own stack, and events come 250 ns apart (the time unit is 1000 ns).
//
// About 21 bits of each free and malloc are random, the slot and the size:
// no encoding can take less than 1.31 bytes per event.
func mallocDenseEvents(n int) []Event {
	const slots = 4096
	rng := rand.New(rand.NewPCG(3, 4))
	var freeChunks [34][]uint64 // by chunk size / 16
	heapTop := uint64(0x5555_5555_a000)
	var now uint64
	events := make([]Event, 0, n)
	malloc := func(size uint64) uint64 {
		chunk := max(32, (size+8+15)&^15)
		list := &freeChunks[chunk/16]
		if len(*list) > 0 {
			addr := (*list)[len(*list)-1]
			*list = (*list)[:len(*list)-1]
			return addr
		}
		addr := heapTop + 16
		heapTop += chunk
		return addr
	}
	var addrs, sizes [slots]uint64
	alloc := func(slot int) {
		size := 8 + uint64(rng.IntN(513))
		addrs[slot], sizes[slot] = malloc(size), size
		now += 250
		events = append(events, Event{Kind: KindAlloc, API: APIMalloc, Process: 1, Thread: 1, Time: now,
			Addr: addrs[slot], Size: size, Stack: 1})
	}
	for slot := range slots {
		alloc(slot)
	}
	for len(events) < n {
		slot := rng.IntN(slots)
		chunk := max(32, (sizes[slot]+8+15)&^15)
		freeChunks[chunk/16] = append(freeChunks[chunk/16], addrs[slot])
		now += 250
		events = append(events, Event{Kind: KindFree, API: APIFree, Process: 1, Thread: 1, Time: now,
			Addr: addrs[slot], Stack: 2})
		alloc(slot)
	}
	return events[:n]
}

// BenchmarkMallocDense writes and reads the events of a malloc-dense loop
// (see mallocDenseEvents) with the settings of a recording: compressed
// blocks, time unit 1000 ns.
func BenchmarkMallocDense(b *testing.B) {
	events := mallocDenseEvents(1 << 21)
	info := Info{TimeUnit: 1000}
	data := encodeEvents(b, info, events, false)
	b.Run("writer", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			w, err := NewWriter(io.Discard, info)
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range events {
				if err := w.Event(e); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
		reportEvents(b, len(events), len(data), cpuTime()-cpu)
	})
	b.Run("reader", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			readBench(b, data, len(events))
		}
		reportEvents(b, len(events), len(data), cpuTime()-cpu)
	})
}

// TestMallocDenseSize guards the size of the malloc-dense trace: at most
// 1.5 bytes per event is what the format is for. (It takes 1.48.)
func TestMallocDenseSize(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a million events")
	}
	events := mallocDenseEvents(1 << 20)
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Info{TimeUnit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if err := w.Event(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if perEvent := float64(buf.Len()) / float64(len(events)); perEvent > 1.5 {
		t.Errorf("the malloc-dense trace takes %.3f bytes per event, want at most 1.5", perEvent)
	}
}

func encodeBench(b *testing.B, events []Event, uncompressed bool) []byte {
	return encodeEvents(b, Info{TimeUnit: 1}, events, uncompressed)
}

func encodeEvents(b *testing.B, info Info, events []Event, uncompressed bool) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, info)
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
				readBench(b, data, len(events))
			}
			reportEvents(b, len(events), len(data), cpuTime()-cpu)
		})
	}
}

// readBench reads a trace of the given number of events.
func readBench(b *testing.B, data []byte, events int) {
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
	if n != events {
		b.Fatalf("read %d events, want %d", n, events)
	}
}

// reportEvents reports throughput in events, the size of an event in the
// file, and the CPU time an event costs (on all threads: with compression
// the background goroutines do much of the work). On a busy machine the CPU
// time varies less than the throughput.
func reportEvents(b *testing.B, events, size int, cpu time.Duration) {
	total := float64(events) * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/event")
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
