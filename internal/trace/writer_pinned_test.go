package trace

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"testing"
)

// mixedEvents calls emit with n events that go through every branch of
// the Writer's coding: three processes, threads enough that a process
// looks them up in a map, addresses 16-byte aligned and not, sizes with
// and without a class list, allocations over live blocks (their frees
// were lost), frees of addresses never allocated, reallocs in place, to
// a new address and over a live block, time that stands still, steps on
// and leaps, events without a stack and stack use of any size.
func mixedEvents(n int, emit func(*Event)) {
	rng := rand.New(rand.NewPCG(7, 8))
	const slots = 3000
	var live [3][slots]bool
	var now uint64
	for range n {
		p := rng.IntN(3)
		e := Event{Process: uint64(p + 1), Thread: 1 + uint64(rng.IntN(4+6*p)), Stack: uint64(rng.IntN(40)),
			StackInUse: uint64(rng.IntN(4)) * 16}
		switch r := rng.IntN(100); {
		case r < 70:
		case r < 90:
			now += uint64(rng.IntN(3000))
		case r < 99:
			now += uint64(rng.IntN(1 << 30))
		default:
			e.StackInUse = uint64(rng.Int64N(MaxStackInUse))
		}
		e.Time = now
		slot := rng.IntN(slots)
		addr := func(slot int) uint64 {
			a := 0x4000_0000 + uint64(p)<<40 + uint64(slot)*96
			if slot%17 == 0 {
				a += 8
			}
			if slot%29 == 0 {
				a += 0x7000_0000 // another chunk of address space
			}
			return a
		}
		size := 1 + uint64(rng.IntN(80))
		if rng.IntN(10) == 0 {
			size = uint64(rng.IntN(10000))
		}
		switch r := rng.IntN(20); {
		case r == 0:
			e.Kind, e.API, e.Addr = KindFree, APIFree, 0x10_0000_0000+uint64(rng.IntN(1<<20))*16
		case r == 1:
			e.Kind, e.API, e.Addr, e.Size = KindAlloc, APIMalloc, addr(slot), size
			live[p][slot] = true
		case r < 4:
			to := rng.IntN(slots)
			if r == 2 {
				to = slot
			}
			e.Kind, e.API, e.OldAddr, e.Addr, e.Size = KindRealloc, APIRealloc, addr(slot), addr(to), size
			live[p][slot], live[p][to] = false, true
		case live[p][slot]:
			e.Kind, e.API, e.Addr = KindFree, API(rng.IntN(8)), addr(slot)
			live[p][slot] = false
		default:
			e.Kind, e.API, e.Addr, e.Size = KindAlloc, API(rng.IntN(8)), addr(slot), size
			live[p][slot] = true
		}
		emit(&e)
	}
}

// oldFreesEvents calls emit with n events of a program that frees, in
// runs, blocks it allocated long before (in earlier blocks of a trace of
// small blocks) among others: blocks just allocated, addresses never
// allocated, in pages with blocks or not, 16-byte aligned and not, with
// the thread, the time, the stack and the stack in use changing now and
// then in a run; and now and then allocates the block freed last again.
func oldFreesEvents(n int, emit func(*Event)) {
	rng := rand.New(rand.NewPCG(11, 12))
	var live []uint64 // in the order allocated
	next := uint64(0x7f00_0000_1000)
	e := Event{Process: 1, Thread: 1}
	for emitted := 0; emitted < n; {
		e.Kind, e.API = KindAlloc, APIMalloc
		if e.Addr != 0 && rng.IntN(3) == 0 { // the block freed last, given out again
			e.Size = 16
			live = append(live, e.Addr)
			emit(&e)
			emitted++
		}
		for range 1 + rng.IntN(400) {
			e.Size = 16 + uint64(rng.IntN(200))
			e.Addr = next
			if rng.IntN(13) == 0 {
				e.Addr += 8
			}
			next += chunkSize(e.Size) + 16
			live = append(live, e.Addr)
			emit(&e)
			emitted++
		}
		e.Kind, e.API = KindFree, APIFree
		for range 1 + rng.IntN(300) {
			if len(live) == 0 {
				break
			}
			switch r := rng.IntN(100); {
			case r < 3:
				e.Thread = 1 + uint64(rng.IntN(3))
			case r < 6:
				e.Time += uint64(rng.IntN(5000))
			case r < 9: // stacks near one another and far apart
				e.Stack = uint64(rng.IntN(5)) << (10 * rng.IntN(2))
			case r < 11:
				e.StackInUse = uint64(rng.IntN(4)) * 16
			}
			switch r := rng.IntN(100); {
			case r < 8: // just allocated: the Writer's table holds it
				i := len(live) - 1 - rng.IntN(min(len(live), 20))
				e.Addr = live[i]
				live = append(live[:i], live[i+1:]...)
			case r < 12: // never allocated, near the blocks just allocated
				e.Addr = next - uint64(rng.IntN(64))*16
			case r < 14:
				e.Addr = 0x10_0000_0000 + uint64(rng.IntN(1<<20))*16
			default: // the oldest
				e.Addr = live[0]
				live = live[1:]
			}
			emit(&e)
			emitted++
		}
	}
}

// TestWriterOutputPinned writes event sequences of every kind the
// recorder meets and compares a hash of the trace with the one the
// Writer gave when it was last meant to change. The Writer is tuned for
// speed; this holds it to the same bytes, which roundtrip tests alone
// would not: a prediction coded differently still decodes. If a change
// of the format or its predictors is meant, update the hashes.
func TestWriterOutputPinned(t *testing.T) {
	info := Info{TimeUnit: 1000}
	slice := func(events []Event) func(func(*Event)) {
		return func(emit func(*Event)) {
			for i := range events {
				emit(&events[i])
			}
		}
	}
	for _, c := range []struct {
		name      string
		blockSize int
		gen       func(func(*Event))
		want      string
	}{
		{"bigheap", 0, func(emit func(*Event)) { bigheapEvents(300_000, emit) }, "0e403bc21a14db0444562d5004fbcf0fc295659f938b6e6a6cf8aa5feea213bb"},
		{"dense", 64 << 10, slice(mallocDenseEvents(200_000)), "98922b997c79be7b2a94a5a776e129c6d9c5137317735bc89543286a9a0014be"},
		{"bench", 256 << 10, slice(benchEvents(200_000)), "9efbe9a749bea9af43cc2de0bfa745111ad4c155c963cc619d3d654efd654818"},
		{"threads", 128 << 10, slice(threadsEvents(8, 1024, 512, 200_000)), "350c91a1db88b1a7ac9f2ee309891f5cf81141fbc8eef2abec47e029cb8e16eb"},
		{"mixed", 32 << 10, func(emit func(*Event)) { mixedEvents(200_000, emit) }, "f9684280d11cded4358ff1a349f4552e5d4fa8e33d4ad76652584192253b6568"},
		{"oldfrees", 8 << 10, func(emit func(*Event)) { oldFreesEvents(200_000, emit) }, "a2afb2f9e802105ace796a196947df5828953a91136d99d434f2a069fe6eb12c"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := sha256.New()
			writeEventsTo(t, h, info, c.blockSize, c.gen)
			if got := hex.EncodeToString(h.Sum(nil)); got != c.want {
				t.Errorf("the trace's SHA-256 is %s, want %s", got, c.want)
			}
		})
		// The recorder writes runs of events at once, and Events codes
		// runs of fresh allocations and of frees of blocks it does not
		// know in loops of their own: in runs of any length, the bytes
		// are the same.
		t.Run(c.name+"/runs", func(t *testing.T) {
			h := sha256.New()
			writeEventRunsTo(t, h, info, c.blockSize, c.gen)
			if got := hex.EncodeToString(h.Sum(nil)); got != c.want {
				t.Errorf("the trace's SHA-256 is %s, want %s", got, c.want)
			}
		})
	}
}

// writeEventRunsTo is writeEventsTo with the events written by Events in
// runs of 1 to 300 of them.
func writeEventRunsTo(tb testing.TB, out io.Writer, info Info, blockSize int, gen func(func(*Event))) {
	w, err := NewWriter(out, info)
	if err != nil {
		tb.Fatal(err)
	}
	w.Uncompressed, w.BlockSize = true, blockSize
	rng := rand.New(rand.NewPCG(9, 10))
	var run []Event
	flush := func() {
		if err := w.Events(run); err != nil {
			tb.Fatal(err)
		}
		run = run[:0]
	}
	want := 1 + rng.IntN(300)
	gen(func(e *Event) {
		if run = append(run, *e); len(run) == want {
			flush()
			want = 1 + rng.IntN(300)
		}
	})
	flush()
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}
