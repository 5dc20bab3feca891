package record

import (
	"errors"
	"io"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
)

// TestDrainOrder writes records of two threads into small rings, their
// sequence numbers interleaved at random, in runs and one at a time, with
// records cut by the ring's end, bursts that are spilled to the backlog,
// and records of other kinds between them, drains them, and checks that
// the trace holds the events in sequence order and the live set the
// blocks a map says.
func TestDrainOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "order.mtr")
	rec, err := newRecorder(Options{Output: path, Args: []string{"order"}, Log: io.Discard,
		TimeUnit: DefaultTimeUnit, MaxFrames: 8, RingSize: 4096, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { rec.srv.close(); rec.file.Close() }()
	rec.symbols = newSymbolTable()
	defer rec.symbols.close()
	// Rings of 512 words: a batch of up to 48 records a thread fills
	// more than half of one, which is spilled.
	r, err := newRegion(regionConfig{slots: 2, firstRing: 4096, ringSize: 4096, nodeCap: 64, maxFrames: 8}, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer r.unmap()
	p := newProcess(1, os.Getpid(), r)
	p.live = newLiveSet(false)

	var seq uint64
	write := [2]uint64{} // in words
	put := func(slot int, words ...uint64) {
		ring := r.ring(slot)
		for _, w := range words {
			ring[write[slot]&uint64(len(ring)-1)] = w
			write[slot]++
		}
		seq++
	}
	publish := func() {
		for slot := range 2 {
			*r.u64(r.slotOff(slot) + slotWrite) = write[slot] * 8
		}
		*r.u64(hdrSeq) = seq
	}
	for slot := range 2 {
		*r.u32(r.slotOff(slot) + slotState) = slotOwned
		put(slot, recThread|4<<8, seq, 0, uint64(100+slot))
	}

	type event struct {
		kind       trace.Kind
		thread     uint64
		addr, size uint64
	}
	var want []event
	live := map[uint64]uint64{}
	rnd := rand.New(rand.NewSource(3))
	next := uint64(0x7000_0000)
	for batch := range 400 {
		count := [2]int{}
		slot := 0
		for count[0] < 48 && count[1] < 48 {
			switch rnd.Intn(8) { // runs of a thread, or a switch
			case 0, 1:
				slot = rnd.Intn(2)
			}
			count[slot]++
			switch op := rnd.Intn(16); {
			case op == 0:
				put(slot, recSkip|2<<8, seq)
			case op < 9 || len(live) == 0:
				size := uint64(16 + rnd.Intn(200))
				put(slot, recAlloc|6<<8|1<<apiShift, seq, 0, next, size, 0)
				want = append(want, event{kind: trace.KindAlloc, thread: uint64(slot + 1), addr: next, size: size})
				live[next] = size
				next += (size + 31) &^ 15
			default:
				addrs := slices.Sorted(maps.Keys(live))
				a := addrs[rnd.Intn(len(addrs))]
				put(slot, recFree|5<<8|5<<apiShift, seq, 0, a, 0)
				want = append(want, event{kind: trace.KindFree, thread: uint64(slot + 1), addr: a})
				delete(live, a)
			}
		}
		publish()
		p.drain(rec, batch == 399)
		if p.damaged != "" {
			t.Fatalf("batch %d: %s", batch, p.damaged)
		}
		if p.nextSeq != seq {
			t.Fatalf("batch %d: %d records handled, want %d", batch, p.nextSeq, seq)
		}
	}
	if err := rec.w.Close(); err != nil {
		t.Fatal(err)
	}
	if p.live.blocks.len() != len(live) {
		t.Errorf("live set of %d blocks, want %d", p.live.blocks.len(), len(live))
	}
	for a, size := range live {
		if got, ok := p.live.size(a); !ok || got != size {
			t.Fatalf("live set: block %#x of %d bytes, %v; want %d", a, got, ok, size)
		}
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := trace.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var got []event
	for {
		rec, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == trace.KindAlloc || rec.Kind == trace.KindFree {
			e := rec.Event
			ev := event{kind: e.Kind, thread: e.Thread, addr: e.Addr}
			if e.Kind == trace.KindAlloc {
				ev.size = e.Size
			}
			got = append(got, ev)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d events in the trace, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
