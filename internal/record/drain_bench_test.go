package record

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkDrain measures what the recorder costs per event, from the
// ring to the trace: a thread that allocates bigheap's blocks (16 to 64
// bytes, one after the other) and frees every other one, in batches that
// fill a quarter of a 1 MiB ring, as a program allocating flat out does
// between two drains. The agent's side (writing the records) is not
// timed. "live" keeps the live set too, as memtrail run does by default
// (the leak scan at exit). "old" frees, rather than every other block of
// the batch, every other block of the batch allocated oldFrees-1 batches
// before, in an earlier block of the trace: bigheap's frees, which the
// Writer codes as raw addresses.
func BenchmarkDrain(b *testing.B) {
	b.Run("trace", func(b *testing.B) { benchmarkDrain(b, false, false) })
	b.Run("live", func(b *testing.B) { benchmarkDrain(b, true, false) })
	b.Run("old", func(b *testing.B) { benchmarkDrain(b, true, true) })
}

// oldFrees is how many batches the benchmark keeps the addresses of: the
// "old" one frees those of the oldest, more events back than a block of
// the trace holds (maxBlockEvents).
const oldFrees = 64

func benchmarkDrain(b *testing.B, keepLive, old bool) {
	rec, err := newRecorder(Options{Output: filepath.Join(b.TempDir(), "bench.mtr"), Args: []string{"bench"}, Log: io.Discard,
		TimeUnit: DefaultTimeUnit, MaxFrames: 8, RingSize: 1 << 20, Threads: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { rec.srv.close(); rec.file.Close() }()
	rec.symbols = newSymbolTable()
	defer rec.symbols.close()
	r, err := newRegion(regionConfig{slots: 2, firstRing: 1 << 20, ringSize: 64 << 10, nodeCap: 64, maxFrames: 8}, os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	defer r.unmap()
	*r.u32(r.slotOff(0) + slotState) = slotOwned
	p := newProcess(1, os.Getpid(), r)
	if keepLive {
		p.live = newLiveSet(false)
	}

	ring := r.ring(0)
	mask := uint64(len(ring) - 1)
	var write, seq, tsc uint64 // write in words
	put := func(words ...uint64) {
		for _, w := range words {
			ring[write&mask] = w
			write++
		}
		seq++
	}
	addr := uint64(0x10000000)
	const batch = 4096     // allocations; with their frees, a quarter of the ring
	var batches [][]uint64 // the addresses allocated by each batch, oldFrees of them
	publish := func() {
		*r.u64(r.slotOff(0) + slotWrite) = write * 8
		*r.u64(hdrSeq) = seq
	}
	put(recThread|4<<8, seq, tsc, uint64(os.Getpid()))
	publish()
	p.drain(rec, false)

	// The machine may be shared: the CPU time of the draining thread
	// says more than the time that passed.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu time.Duration
	events := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tsc++ // a new coarse clock value for each batch
		live := make([]uint64, 0, batch)
		if len(batches) == oldFrees {
			live = batches[0][:0]
			batches = batches[1:]
		}
		for k := uint64(0); k < batch; k++ {
			size := 16 + (k*5)%7*8
			put(recAlloc|6<<8|1<<apiShift, seq, tsc, addr, size, 0)
			live = append(live, addr)
			addr += (size + 8 + 15) &^ 15 // glibc's chunks: 8 bytes of header, 16-byte aligned
		}
		batches = append(batches, live)
		freed := live
		if old {
			freed = nil
			if len(batches) == oldFrees {
				freed = batches[0]
			}
		}
		for k := 0; k < len(freed); k += 2 {
			put(recFree|5<<8|5<<apiShift, seq, tsc, freed[k], 0)
		}
		publish()
		events += batch + len(freed)/2
		b.StartTimer()
		cpu -= threadCPU()
		p.drain(rec, false)
		cpu += threadCPU()
		if p.damaged != "" {
			b.Fatal(p.damaged)
		}
	}
	b.StopTimer()
	if rec.writeErr != nil {
		b.Fatal(rec.writeErr)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(events), "cpu-ns/event")
}

// threadCPU returns the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}
