package record

import (
	"errors"
	"io"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
)

// TestDrainOrder writes records of two threads into small rings, their
// sequence numbers interleaved at random, in runs and one at a time, with
// records cut by the ring's end, bursts that are spilled to the backlog,
// and records of other kinds between them, drains them, and checks that
// the trace holds the events in sequence order and the live set the
// blocks a map says. Events have call stacks, most of them one seen
// before, some a new one: its nodes must be in the trace before the
// event that names it. Half the allocations and frees after a thread's
// first are short (ALLOC_SAME, FREE_SAME): their stack in use is that of
// the thread's latest whole one. In rings of 64 KiB, runs are longer
// than the drain's buffer of events (runEvents).
func TestDrainOrder(t *testing.T) {
	t.Run("small", func(t *testing.T) { testDrainOrder(t, 4096, 48, 400) })
	t.Run("long", func(t *testing.T) { testDrainOrder(t, 64<<10, 4*runEvents, 30) })
}

// testDrainOrder is TestDrainOrder with rings of ringSize bytes and
// batches (drains) of up to maxRun records a thread.
func testDrainOrder(t *testing.T, ringSize uint64, maxRun, batches int) {
	path := filepath.Join(t.TempDir(), "order.mtr")
	rec, err := newRecorder(Options{Output: path, Args: []string{"order"}, Log: io.Discard,
		TimeUnit: DefaultTimeUnit, MaxFrames: 8, RingSize: ringSize, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { rec.srv.close(); rec.file.Close() }()
	rec.symbols = newSymbolTable()
	defer rec.symbols.close()
	// Rings of 512 words: a batch of up to 48 records a thread fills
	// more than half of one, which is spilled.
	r, err := newRegion(regionConfig{slots: 2, firstRing: ringSize, ringSize: ringSize, nodeCap: 64, maxFrames: 8}, os.Getpid())
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
	// Call-stack nodes 1 to 63, each a child of the one before it or of
	// none, as the agent adds them.
	for id := uint64(1); id < 64; id++ {
		off := r.nodesOffset + id*nodeBytes
		*r.u32(off + nodeParent) = uint32(id / 2)
		*r.u64(off + nodeOffset) = 0x1000 + id
	}
	*r.u64(hdrNodeCount) = 63

	type event struct {
		kind       trace.Kind
		thread     uint64
		addr, size uint64
		stack      uint64
		inUse      uint64
	}
	// The stack in use of each thread's latest whole allocation or free,
	// which its short ones repeat; have: it made one.
	var sameUse [2]uint64
	var have [2]bool
	var want []event
	live := map[uint64]uint64{}
	rnd := rand.New(rand.NewSource(3))
	inUse := func(slot int) (uint64, bool) {
		if have[slot] && rnd.Intn(2) == 0 {
			return sameUse[slot], true
		}
		have[slot], sameUse[slot] = true, uint64(1+rnd.Intn(1000))*16
		return sameUse[slot], false
	}
	next := uint64(0x7000_0000)
	for batch := range batches {
		count := [2]int{}
		slot := 0
		for count[0] < maxRun && count[1] < maxRun {
			switch rnd.Intn(8 * maxRun / 48) { // runs of a thread, or a switch
			case 0, 1:
				slot = rnd.Intn(2)
			}
			count[slot]++
			stack := uint64(1 + batch%40) // a new one at times, in the middle of a run
			if rnd.Intn(4) == 0 {
				stack = uint64(1 + rnd.Intn(63))
			}
			switch op := rnd.Intn(16); {
			case op == 0:
				put(slot, recSkip|2<<8, seq)
			case op < 9 || len(live) == 0:
				size := uint64(16 + rnd.Intn(200))
				use, same := inUse(slot)
				if same {
					put(slot, recAllocSame|4<<8|1<<apiShift|stack<<stackShift, seq, next, size)
				} else {
					put(slot, recAlloc|6<<8|1<<apiShift|stack<<stackShift, seq, 0, next, size, use)
				}
				want = append(want, event{kind: trace.KindAlloc, thread: uint64(slot + 1), addr: next, size: size, stack: stack, inUse: use})
				live[next] = size
				next += (size + 31) &^ 15
			default:
				addrs := slices.Sorted(maps.Keys(live))
				a := addrs[rnd.Intn(len(addrs))]
				use, same := inUse(slot)
				if same {
					put(slot, recFreeSame|3<<8|5<<apiShift|stack<<stackShift, seq, a)
				} else {
					put(slot, recFree|5<<8|5<<apiShift|stack<<stackShift, seq, 0, a, use)
				}
				want = append(want, event{kind: trace.KindFree, thread: uint64(slot + 1), addr: a, stack: stack, inUse: use})
				delete(live, a)
			}
		}
		publish()
		p.drain(rec, batch == batches-1)
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
	nodes := map[uint64]bool{}
	for {
		rec, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == trace.KindStackNode {
			n := rec.StackNode
			if nodes[n.ID] || n.Parent != n.ID/2 || n.Parent != 0 && !nodes[n.Parent] {
				t.Fatalf("stack node %d of parent %d: written before, or its parent not", n.ID, n.Parent)
			}
			nodes[n.ID] = true
		}
		if rec.Kind == trace.KindAlloc || rec.Kind == trace.KindFree {
			e := rec.Event
			if !nodes[e.Stack] {
				t.Fatalf("event %d names stack %d before its node", len(got), e.Stack)
			}
			ev := event{kind: e.Kind, thread: e.Thread, addr: e.Addr, stack: e.Stack, inUse: e.StackInUse}
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

// TestDrainShortFirst checks that a short allocation or free
// (ALLOC_SAME, FREE_SAME) with no whole one before it in its ring since
// its thread's THREAD record, which the agent never writes, is taken for
// damage, and not for an event of some other time.
func TestDrainShortFirst(t *testing.T) {
	for _, short := range [][]uint64{
		{recAllocSame | 4<<8, 1, 0x7000_0000, 32},
		{recFreeSame | 3<<8, 1, 0x7000_0000},
	} {
		for _, before := range [][]uint64{nil, {recAlloc | 6<<8, 0, 0, 0x6000_0000, 16, 64}} {
			rec, err := newRecorder(Options{Output: filepath.Join(t.TempDir(), "short.mtr"), Args: []string{"short"}, Log: io.Discard,
				TimeUnit: DefaultTimeUnit, MaxFrames: 8, RingSize: 4096, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			rec.symbols = newSymbolTable()
			r, err := newRegion(regionConfig{slots: 1, firstRing: 4096, ringSize: 4096, nodeCap: 64, maxFrames: 8}, os.Getpid())
			if err != nil {
				t.Fatal(err)
			}
			p := newProcess(1, os.Getpid(), r)
			p.live = newLiveSet(false)
			*r.u32(r.slotOff(0) + slotState) = slotOwned
			// A whole allocation before the thread (re)attaches is no
			// reference for the records after its THREAD record.
			words := append([]uint64{}, before...)
			words = append(words, recThread|4<<8, uint64(len(before)/6), 0, 100)
			seq := uint64(len(before)/6) + 1
			short[1] = seq
			words = append(words, short...)
			ring := r.ring(0)
			copy(ring, words)
			*r.u64(r.slotOff(0) + slotWrite) = uint64(len(words)) * 8
			*r.u64(hdrSeq) = seq + 1
			p.drain(rec, true)
			if !strings.Contains(p.damaged, "repeats the time") {
				t.Errorf("record %#x after %d words: damage %q, want one of a record that repeats the time", short[0]&0xff, len(before), p.damaged)
			}
			r.unmap()
			rec.symbols.close()
			rec.srv.close()
			rec.file.Close()
		}
	}
}
