package trace

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// predictorEvents returns events that take every path of the predictors:
// many processes and threads interleaved, reallocs in place and moving,
// frees of blocks allocated before the block or never, addresses that come
// back while they are live, odd and far addresses, huge sizes and sizes of
// every class, handle numbers released and reused.
func predictorEvents() []Event {
	var events []Event
	var now uint64
	add := func(e Event) {
		now += 7
		e.Time = now
		if e.Process == 0 {
			e.Process = 1
		}
		events = append(events, e)
	}
	alloc := func(p, addr, size uint64) {
		add(Event{Kind: KindAlloc, API: APIMalloc, Process: p, Thread: 1 + p%3, Addr: addr, Size: size, Stack: 1 + addr%5})
	}
	free := func(p, addr uint64) {
		add(Event{Kind: KindFree, API: APIFree, Process: p, Thread: 1, Addr: addr, Stack: 9})
	}
	realloc := func(p, old, addr, size uint64) {
		add(Event{Kind: KindRealloc, API: APIRealloc, Process: p, Thread: 2, OldAddr: old, Addr: addr, Size: size, Stack: 4})
	}

	// Reuse within a class, LIFO, and handle numbers reused.
	for i := range uint64(20) {
		alloc(1, 0x1000+i*32, 24)
	}
	for i := range uint64(20) {
		free(1, 0x1000+(19-i)*32)
	}
	for i := range uint64(20) {
		alloc(1, 0x1000+i*32, 20)
	}
	// Every class, and sizes at the edges of the stacked ones.
	for size := uint64(0); size < 5000; size += 13 {
		alloc(1, 0x10_0000+size*64, size)
	}
	for size := uint64(0); size < 5000; size += 13 {
		free(1, 0x10_0000+size*64)
	}
	for _, size := range []uint64{maxStackedSize - 1, maxStackedSize, maxStackedSize + 1, 1 << 40, math.MaxUint64} {
		alloc(1, 0x20_0000, size)
		free(1, 0x20_0000)
		alloc(1, 0x20_0000, size)
	}
	// Fresh memory, one chunk after the other.
	top := uint64(0x60_0010)
	for size := uint64(0); size < 6000; size += 37 {
		alloc(1, top, size)
		top += max(32, (size+23)&^15)
	}
	// Reallocs in place, in the same class and another, and moving.
	alloc(1, 0x3000, 16)
	realloc(1, 0x3000, 0x3000, 20)
	realloc(1, 0x3000, 0x3000, 100)
	realloc(1, 0x3000, 0x9000, 5000)
	realloc(1, 0x9000, 0x3000, 16)
	realloc(1, 0, 0x4000, 16) // realloc(NULL, n)
	// Frees of blocks allocated before the block, or never.
	free(1, 0x7777_0000)
	free(1, 0x7777_0010)
	free(1, 0)
	realloc(1, 0x6666_0000, 0x6666_0000, 64)
	// Addresses allocated again while they are live.
	alloc(1, 0x5000, 32)
	alloc(1, 0x5000, 48)
	alloc(1, 0x5000, 64)
	free(1, 0x5000)
	free(1, 0x5000)
	// Odd, far and extreme addresses.
	for _, addr := range []uint64{1, 0x5001, 0, math.MaxUint64, 1 << 63, 1<<63 + 3, 1<<62 + 1, 0x5555_5555_5559} {
		alloc(1, addr, 8)
	}
	for _, addr := range []uint64{1 << 63, 1, math.MaxUint64, 0x5555_5555_5559} {
		free(1, addr)
	}
	// Processes and threads interleaved event by event.
	rng := rand.New(rand.NewPCG(1, 1))
	live := map[uint64][]uint64{}
	for range 3000 {
		p := 1 + uint64(rng.IntN(5))
		if l := live[p]; len(l) > 0 && rng.IntN(2) == 0 {
			i := rng.IntN(len(l))
			free(p, l[i])
			live[p] = slices.Delete(l, i, i+1)
			continue
		}
		addr := 0x40_0000 + uint64(rng.IntN(1000))*16
		alloc(p, addr, uint64(rng.IntN(600)))
		live[p] = append(live[p], addr)
	}
	// Every API.
	for api := range API(apiMask + 1) {
		add(Event{Kind: KindAlloc, API: api, Addr: 0x8000 + uint64(api)*16, Size: 1})
	}
	return events
}

func TestPredictorRoundTrip(t *testing.T) {
	events := predictorEvents()
	for _, blockSize := range []int{1, 100, 4096, 0} {
		for _, uncompressed := range []bool{false, true} {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, Info{TimeUnit: 1})
			if err != nil {
				t.Fatal(err)
			}
			w.BlockSize, w.Uncompressed = blockSize, uncompressed
			for _, e := range events {
				if err := w.Event(e); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := NewReader(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			var got []Event
			for {
				rec, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("block size %d: %v", blockSize, err)
				}
				if rec.Kind.IsEvent() {
					got = append(got, rec.Event)
				}
			}
			if len(got) != len(events) {
				t.Fatalf("block size %d: read %d events, want %d", blockSize, len(got), len(events))
			}
			for i := range events {
				if got[i] != events[i] {
					t.Fatalf("block size %d, uncompressed %v: event %d read as %+v, want %+v", blockSize, uncompressed, i, got[i], events[i])
				}
			}
		}
	}
}

// blockOf writes events in one block and returns its streams.
func blockOf(t *testing.T, events ...Event) streamSet {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Info{TimeUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	w.BlockSize = 1 << 24
	for _, e := range events {
		if err := w.Event(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()[fileHeaderSize:]
	h, reason := parseBlockHeader(data)
	if reason != "" {
		t.Fatal(reason)
	}
	s, _, reason := decodeStreams(h, data[blockHeaderSize:blockHeaderSize+int(h.stored)], nil)
	if reason != "" {
		t.Fatal(reason)
	}
	return s
}

// values decodes the varint column k of s.
func values(s streamSet, k int) []uint64 {
	var c eventStreams
	for i := range s {
		c.c[i].p = s[i]
	}
	var vs []uint64
	for c.c[k].left() > 0 {
		vs = append(vs, c.uv(k))
	}
	return vs
}

// seqAllocs returns n allocations of 8 bytes one after the other from
// 0x1000.
func seqAllocs(n int) []Event {
	var es []Event
	for i := range n {
		es = append(es, Event{Kind: KindAlloc, Addr: 0x1000 + uint64(i)*0x20, Size: 8})
	}
	return es
}

// stepsOf returns the address codes of seqAllocs(n).
func stepsOf(n int) []uint64 {
	codes := []uint64{step(0x1000)}
	for range n - 1 {
		codes = append(codes, step(0))
	}
	return codes
}

// TestPredictorCodes checks the codes the Writer chooses.
func TestPredictorCodes(t *testing.T) {
	alloc := func(addr, size uint64) Event { return Event{Kind: KindAlloc, Addr: addr, Size: size} }
	free := func(addr uint64) Event { return Event{Kind: KindFree, Addr: addr} }
	realloc := func(old, addr, size uint64) Event {
		return Event{Kind: KindRealloc, OldAddr: old, Addr: addr, Size: size}
	}
	for _, tc := range []struct {
		name      string
		events    []Event
		addr, ref []uint64
		raw       []int64
	}{
		// Fresh blocks one after the other: chunks of 32, 112 and 5008
		// bytes.
		{"fresh memory",
			[]Event{alloc(0x1010, 24), alloc(0x1030, 100), alloc(0x10a0, 5000), alloc(0x2430, 8)},
			[]uint64{step(0x1010), step(0), step(0), step(0)}, nil, nil},
		{"steps",
			[]Event{alloc(0x1000, 8), alloc(0x1040, 8), alloc(0x1010, 8), alloc(0x1033, 8), alloc(0x1000, 8)},
			[]uint64{step(0x1000), step(0x20), step(-0x50), step(3), step(-0x53)}, nil, nil},
		{"the step of a multiple of 16 is shorter",
			[]Event{alloc(0x10, 8), alloc(0x31, 8)},
			[]uint64{addrDelta + 4, addrDelta + 5}, nil, nil}, // zigzag(1) << 1, zigzag(1) << 1 | 1
		{"next moves on only with steps and escapes",
			[]Event{alloc(0x1000, 8), free(0x1000), alloc(0x1000, 8), alloc(0x1020, 8)},
			[]uint64{step(0x1000), addrPop, step(0)}, []uint64{1}, nil},
		{"reuse of the class stack and handle numbers",
			[]Event{alloc(0x1000, 8), alloc(0x2000, 8), free(0x1000), free(0x2000), alloc(0x2000, 24), alloc(0x1000, 1), free(0x1000)},
			[]uint64{step(0x1000), step(0xfe0), addrPop, addrPop}, []uint64{refRecent + 1, refRecent, refRecent}, nil},
		{"the latest address freed in another class",
			[]Event{alloc(0x1000, 8), free(0x1000), alloc(0x1000, 100)},
			[]uint64{step(0x1000), addrLastFreed}, []uint64{1}, nil},
		{"realloc in place, same class",
			[]Event{alloc(0x1000, 16), realloc(0x1000, 0x1000, 20)},
			[]uint64{step(0x1000), addrPop}, []uint64{1}, nil},
		{"realloc in place, other class",
			[]Event{alloc(0x1000, 16), realloc(0x1000, 0x1000, 100)},
			[]uint64{step(0x1000), addrLastFreed}, []uint64{1}, nil},
		{"realloc moving",
			[]Event{alloc(0x1000, 16), realloc(0x1000, 0x1020, 100), free(0x1020)},
			[]uint64{step(0x1000), step(0)}, []uint64{1, 1}, nil},
		{"escapes",
			[]Event{free(0x7000), free(0x6ff0), realloc(0x8000, 0x8000, 8)},
			[]uint64{addrLastFreed}, []uint64{0, 0, 0}, []int64{0x7000, -0x10, 0x1010}},
		{"far steps escape",
			[]Event{alloc(1<<62+1, 8), alloc(1<<63+2, 8), alloc(1<<63+0x22, 8)},
			[]uint64{addrEscape, addrEscape, step(0)}, nil, []int64{1<<62 + 1, 1<<62 + 1}},
		{"a live address allocated again gets a new handle",
			[]Event{alloc(0x1000, 8), alloc(0x1000, 8), free(0x1000), free(0x1000)},
			[]uint64{step(0x1000), step(-0x20)}, []uint64{refRecent, refEscape}, []int64{0x1000}},
		{"a block allocated before the latest 16 is named by its handle",
			append(seqAllocs(17), free(0x1000), free(0x1000+16*0x20)),
			stepsOf(17), []uint64{refHandle, refRecent}, nil},
		{"processes apart",
			[]Event{alloc(0x1000, 8), {Kind: KindAlloc, Process: 2, Addr: 0x1000, Size: 8}, free(0x1000), {Kind: KindFree, Process: 2, Addr: 0x1000}},
			[]uint64{step(0x1000), step(0x1000)}, []uint64{1, 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := blockOf(t, tc.events...)
			var raw []int64
			for _, v := range values(s, streamRawAddr) {
				raw = append(raw, int64(unzigzag(v)))
			}
			if got := values(s, streamAddr); !slices.Equal(got, tc.addr) {
				t.Errorf("address codes %v, want %v", got, tc.addr)
			}
			if got := values(s, streamRef); !slices.Equal(got, tc.ref) {
				t.Errorf("reference codes %v, want %v", got, tc.ref)
			}
			if !slices.Equal(raw, tc.raw) {
				t.Errorf("raw addresses %v, want %v", raw, tc.raw)
			}
		})
	}
}

func TestOpBytes(t *testing.T) {
	for k, op := range map[Kind]byte{KindAlloc: opAlloc, KindFree: opFree, KindRealloc: opRealloc} {
		if got := opByte(k, APIDelete); got>>opShift != op || API(got&apiMask) != APIDelete {
			t.Errorf("opByte(%v, %v) = %#x", k, APIDelete, got)
		}
	}
}

// TestClassStacks checks that a class stack keeps its latest addresses:
// once full, a push drops the oldest.
func TestClassStacks(t *testing.T) {
	var h heapState
	h.reset()
	if _, ok := h.take(2, 0); ok {
		t.Fatal("a new state has a class stack")
	}
	for i := range uint64(classStackDepth + 5) {
		h.push(2, i)
	}
	if d := h.depthOf(2, 4); d != -1 {
		t.Fatalf("address 4 at depth %d; the full stack should have dropped it", d)
	}
	// Taking from the middle closes the gap: what was below moves up.
	if got, ok := h.take(2, 3); !ok || got != classStackDepth+1 {
		t.Fatalf("take(depth 3) = %d, %v; want %d", got, ok, classStackDepth+1)
	}
	for i := uint64(classStackDepth + 4); i >= 5; i-- {
		if i == classStackDepth+1 {
			continue
		}
		top, ok := h.take(2, 0)
		if !ok || top != i {
			t.Fatalf("top %d, %v; want %d", top, ok, i)
		}
	}
	if _, ok := h.take(2, 0); ok {
		t.Fatal("the stack holds more than its depth")
	}
	for size, class := range map[uint64]uint{0: 2, 8: 2, 24: 2, 25: 3, 1000: 63, maxStackedSize: 255, maxStackedSize + 1: 0, math.MaxUint64: 0} {
		if got := sizeClass(size); got != class {
			t.Errorf("sizeClass(%d) = %d, want %d", size, got, class)
		}
		if class != 0 && chunkSize(size) != uint64(class)*16 {
			t.Errorf("chunkSize(%d) = %d, want %d", size, chunkSize(size), class*16)
		}
	}
	for size, chunk := range map[uint64]uint64{5000: 5008, math.MaxUint64 - 7: 32, math.MaxUint64 - 30: 0xfffffffffffffff0} {
		if got := chunkSize(size); got != chunk {
			t.Errorf("chunkSize(%d) = %#x, want %#x", size, got, chunk)
		}
	}
}

// TestDamagedStreams damages each stream of a sound block under a CRC that
// fits, by cutting its last byte or adding one: the damage is reported, and
// the next block is read whole.
func TestDamagedStreams(t *testing.T) {
	s := blockOf(t, predictorEvents()...)
	last := craftFile(block(recs(events(1), endRec), alloc(16, step(0x1000))))[fileHeaderSize:]
	for k := range s {
		if len(s[k]) == 0 {
			continue
		}
		for _, change := range []string{"cut", "added"} {
			damaged := s
			damaged[k] = bytes.Clone(s[k])
			if change == "cut" {
				damaged[k] = damaged[k][:len(damaged[k])-1]
			} else {
				damaged[k] = append(damaged[k], 0)
			}
			data := append(craftFile(damaged), last...)
			r, err := NewReader(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			var damage []*DamageError
			var kinds []Kind
			for {
				rec, err := r.Next()
				var d *DamageError
				if errors.As(err, &d) {
					damage = append(damage, d)
					continue
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s stream %s: %v", streamNames[k], change, err)
				}
				kinds = append(kinds, rec.Kind)
			}
			if len(damage) != 1 || damage[0].Offset != fileHeaderSize {
				t.Errorf("%s stream %s: damage %v, want one in the first block", streamNames[k], change, damage)
			}
			if n := len(kinds); n < 2 || kinds[n-2] != KindAlloc || kinds[n-1] != KindEnd {
				t.Errorf("%s stream %s: the block after the damage was not read", streamNames[k], change)
			}
		}
	}
}
