package trace

import (
	"io"
	"math/rand/v2"
	"sync"
	"testing"
)

// bigheapEvents calls emit with the events of bench/'s bigheap workload
// as glibc serves it, in one Event that it reuses, as the recorder does:
// allocs blocks of 16 to 64 bytes carved one after the other from fresh
// memory, then frees of every other one in address order. The time unit
// is 1 ms and the program makes about 10 events a µs.
func bigheapEvents(blocks int, emit func(*Event)) {
	e := Event{Kind: KindAlloc, API: APIMalloc, Process: 1, Thread: 1, Stack: 1, StackInUse: 96}
	start := uint64(0x5555_5555_a010)
	e.Addr = start
	for i := range blocks {
		e.Size = 16 + uint64(i*5%7)*8
		e.Time += 100
		emit(&e)
		e.Addr += chunkSize(e.Size)
	}
	e = Event{Kind: KindFree, API: APIFree, Process: 1, Thread: 1, Time: e.Time, Addr: start, Stack: 2, StackInUse: 96}
	for i := 0; i < blocks; i += 2 {
		e.Time += 100
		emit(&e)
		e.Addr += chunkSize(16+uint64(i*5%7)*8) + chunkSize(16+uint64((i+1)*5%7)*8)
	}
}

// threadsEvents returns the events of bench/'s threads workload as the
// recorder sees them: threads threads each run the malloc-dense loop on
// slots slots of their own, with an arena each (per-size LIFO free lists
// and a top of its own), and their events arrive in runs of up to run
// events per thread, as the recorder drains their rings in turn.
func threadsEvents(threads, slots, run, n int) []Event {
	rng := rand.New(rand.NewPCG(5, 6))
	type arena struct {
		free  [34][]uint64
		top   uint64
		addrs []uint64
		sizes []uint64
	}
	arenas := make([]arena, threads)
	for i := range arenas {
		arenas[i] = arena{top: 0x7f00_0000_0000 + uint64(i)<<32, addrs: make([]uint64, slots), sizes: make([]uint64, slots)}
	}
	var now uint64
	events := make([]Event, 0, n)
	for len(events) < n {
		ti := rng.IntN(threads)
		a := &arenas[ti]
		for range 1 + rng.IntN(run) {
			slot := rng.IntN(slots)
			now += 30
			if a.addrs[slot] != 0 {
				chunk := chunkSize(a.sizes[slot])
				a.free[chunk/16] = append(a.free[chunk/16], a.addrs[slot])
				events = append(events, Event{Kind: KindFree, API: APIFree, Process: 1, Thread: uint64(ti + 1),
					Time: now, Addr: a.addrs[slot], Stack: 2, StackInUse: 160})
			}
			size := 8 + uint64(rng.IntN(513))
			chunk := chunkSize(size)
			addr := a.top + 16
			if l := &a.free[chunk/16]; len(*l) > 0 {
				addr = (*l)[len(*l)-1]
				*l = (*l)[:len(*l)-1]
			} else {
				a.top += chunk
			}
			a.addrs[slot], a.sizes[slot] = addr, size
			events = append(events, Event{Kind: KindAlloc, API: APIMalloc, Process: 1, Thread: uint64(ti + 1),
				Time: now, Addr: addr, Size: size, Stack: 1, StackInUse: 160})
		}
	}
	return events[:n]
}

// BenchmarkWriterWorkloads writes the events of bench/'s workloads as
// the recorder does (time unit 1 ms, one Event at a time through EventAt),
// to measure what the Writer costs per event. "raw" leaves the blocks
// uncompressed, so that cpu-ns/event is the Writer's own encoding.
func BenchmarkWriterWorkloads(b *testing.B) {
	info := Info{TimeUnit: 1_000_000}
	const n = 1 << 21
	// fromSlice emits the events that make returns, made once when first
	// needed: only the workloads asked for are made.
	fromSlice := func(make func() []Event) func(func(*Event)) {
		events := sync.OnceValue(make)
		return func(emit func(*Event)) {
			events := events()
			for i := range events {
				emit(&events[i])
			}
		}
	}
	for _, wl := range []struct {
		name   string
		events int
		gen    func(func(*Event))
	}{
		{"bigheap", 1_500_000, func(emit func(*Event)) { bigheapEvents(1_000_000, emit) }},
		{"dense", n, fromSlice(func() []Event { return mallocDenseEvents(n) })},
		{"threads", n, fromSlice(func() []Event { return threadsEvents(8, 1024, 512, n) })},
	} {
		for _, raw := range []bool{true, false} {
			name := wl.name + "/zstd"
			if raw {
				name = wl.name + "/raw"
			}
			b.Run(name, func(b *testing.B) { rewrite(b, info, wl.events, raw, wl.gen) })
		}
	}
}

// writeEventsTo writes events with a Writer of info into out, in blocks of
// blockSize, uncompressed.
func writeEventsTo(tb testing.TB, out io.Writer, info Info, blockSize int, gen func(func(*Event))) {
	w, err := NewWriter(out, info)
	if err != nil {
		tb.Fatal(err)
	}
	w.Uncompressed, w.BlockSize = true, blockSize
	gen(func(e *Event) {
		if err := w.EventAt(e); err != nil {
			tb.Fatal(err)
		}
	})
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}
