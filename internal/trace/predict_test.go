package trace

import (
	"bytes"
	"errors"
	"fmt"
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
	// Threads that hand blocks to each other, freed in the order they
	// were allocated and in random order, and one class list pushed past
	// its span, so that addresses drop out of it and come back from
	// depths past the Writer's limit.
	var queue []uint64
	for i := range uint64(3000) {
		th := 1 + i%4
		addr := 0x90_0000 + (i%1500)*48
		add(Event{Kind: KindAlloc, API: APIMalloc, Process: 6, Thread: th, Addr: addr, Size: 40, Stack: 3})
		queue = append(queue, addr)
		if len(queue) > 700 {
			k := 0
			if rng.IntN(4) == 0 {
				k = rng.IntN(len(queue))
			}
			add(Event{Kind: KindFree, API: APIFree, Process: 6, Thread: 1 + (th+1)%4, Addr: queue[k], Stack: 5})
			queue = slices.Delete(queue, k, k+1)
		}
	}
	for _, addr := range queue {
		add(Event{Kind: KindFree, API: APIFree, Process: 6, Thread: 9, Addr: addr, Stack: 5})
	}
	// One address in the lists of many classes and threads at once.
	for i := range uint64(12) {
		th, size := 20+i%3, 8+i*16
		add(Event{Kind: KindAlloc, API: APIMalloc, Process: 7, Thread: th, Addr: 0xa0_0000, Size: size})
		add(Event{Kind: KindFree, API: APIFree, Process: 7, Thread: th + 1, Addr: 0xa0_0000})
	}
	for i := range uint64(12) {
		add(Event{Kind: KindAlloc, API: APIMalloc, Process: 7, Thread: 20 + i%4, Addr: 0xa0_0000, Size: 8 + (11-i)*16})
	}
	// Every API.
	for api := range API(apiMask + 1) {
		add(Event{Kind: KindAlloc, API: api, Addr: 0x8000 + uint64(api)*16, Size: 1})
	}
	return events
}

func TestPredictorRoundTrip(t *testing.T) {
	events := predictorEvents()
	recs := make([]Record, len(events))
	for i, e := range events {
		recs[i] = Record{Kind: e.Kind, Event: e}
	}
	for _, blockSize := range []int{1, 100, 4096, 0} {
		for _, uncompressed := range []bool{false, true} {
			t.Run(fmt.Sprintf("block size %d, uncompressed %v", blockSize, uncompressed), func(t *testing.T) {
				var buf bytes.Buffer
				w, err := NewWriter(&buf, Info{TimeUnit: 1})
				if err != nil {
					t.Fatal(err)
				}
				w.BlockSize, w.Uncompressed = blockSize, uncompressed
				got := withoutLostFrees(t, writeAndRead(t, w, &buf, recs))
				if len(got) != len(events) {
					t.Fatalf("read %d records, want %d events", len(got), len(events))
				}
				for i := range events {
					if got[i].Kind != events[i].Kind || asWritten(got[i].Event) != events[i] {
						t.Fatalf("event %d read as %+v, want %+v", i, got[i], events[i])
					}
				}
			})
		}
	}
}

// withoutLostFrees checks the lost frees the Writer added to recs, and
// returns recs without them. A lost free names, by its handle, a block of
// its trace block that an allocation or realloc right after it, of the
// same process, thread and time, gets the address of.
func withoutLostFrees(t *testing.T, recs []Record) []Record {
	t.Helper()
	var kept []Record
	lost := 0
	for i, r := range recs {
		if r.Kind != KindFree || r.Event.API != APILost {
			kept = append(kept, r)
			continue
		}
		lost++
		e := r.Event
		if i+1 == len(recs) {
			t.Fatalf("record %d, a lost free, is the last", i)
		}
		next := recs[i+1].Event
		if e.Handle == 0 || e.Stack != 0 || next.Kind == KindFree || next.Addr != e.Addr || next.Kind == KindRealloc && next.OldAddr == e.Addr ||
			next.Process != e.Process || next.Thread != e.Thread || next.Time != e.Time || next.Block != e.Block {
			t.Fatalf("record %d, a lost free %+v, is not that of the allocation after it, %+v", i, e, next)
		}
	}
	if lost == 0 {
		t.Errorf("no lost free in %d records", len(recs))
	}
	return kept
}

// asWritten returns an event the Reader read without the fields that
// the Writer ignores: what the predictors of its block knew of it.
func asWritten(e Event) Event {
	e.Handle, e.OldHandle, e.Block = 0, 0, 0
	return e
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
	talloc := func(thread, addr, size uint64) Event {
		return Event{Kind: KindAlloc, Thread: thread, Addr: addr, Size: size}
	}
	tfree := func(thread, addr uint64) Event { return Event{Kind: KindFree, Thread: thread, Addr: addr} }
	frees := func(n int) []Event { // of seqAllocs(n), in order
		var es []Event
		for i := range n {
			es = append(es, free(0x1000+uint64(i)*0x20))
		}
		return es
	}
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
			[]Event{alloc(0x1000, 8), alloc(0x1040, 8), alloc(0x1010, 8), alloc(0x1033, 8), alloc(0xffd, 8)},
			[]uint64{step(0x1000), step(0x20), step(-0x50), step(3), step(-0x56)}, nil, nil},
		{"the step of a multiple of 16 is shorter",
			[]Event{alloc(0x10, 8), alloc(0x31, 8)},
			[]uint64{addrStep + 2*4, addrStep + 2*5}, nil, nil}, // zigzag(1) << 1, zigzag(1) << 1 | 1
		{"next moves on only with steps and escapes",
			[]Event{alloc(0x1000, 8), free(0x1000), alloc(0x1000, 8), alloc(0x1020, 8)},
			[]uint64{step(0x1000), depth(0), step(0)}, []uint64{refOldest}, nil},
		{"reuse of the class list and handle numbers",
			[]Event{alloc(0x1000, 8), alloc(0x2000, 8), free(0x1000), free(0x2000), alloc(0x2000, 24), alloc(0x1000, 1), free(0x1000)},
			[]uint64{step(0x1000), step(0xfe0), depth(0), depth(0)}, []uint64{refOldest, refOldest, refRecent}, nil},
		{"depths in the class list",
			[]Event{alloc(0x1000, 8), alloc(0x2000, 8), alloc(0x3000, 8), free(0x1000), free(0x2000), free(0x3000),
				alloc(0x1000, 8), alloc(0x3000, 8), alloc(0x2000, 8)},
			[]uint64{step(0x1000), step(0xfe0), step(0xfe0), depth(2), depth(0), depth(0)}, []uint64{refOldest, refOldest, refOldest}, nil},
		{"the rank of a block that is not the oldest",
			[]Event{alloc(0x1000, 8), alloc(0x2000, 8), alloc(0x3000, 8), free(0x2000), free(0x1000)},
			[]uint64{step(0x1000), step(0xfe0), step(0xfe0)}, []uint64{refRecent + 1, refOldest}, nil},
		{"the oldest of the source thread",
			[]Event{talloc(1, 0x1000, 8), talloc(1, 0x2000, 8), tfree(2, 0x1000), tfree(2, 0x2000), talloc(2, 0x1000, 8), talloc(1, 0x2000, 8)},
			[]uint64{step(0x1000), step(0xfe0), addrSource, 1, depth(0)}, []uint64{refRecent + 1, refOldest}, nil},
		{"a depth past the Writer's limit is not coded",
			append(append(seqAllocs(writerMaxDepth+1), frees(writerMaxDepth+1)...), alloc(0x1000, 8)),
			append(stepsOf(writerMaxDepth+1), step(-0x20*(writerMaxDepth+1))), slices.Repeat([]uint64{refOldest}, writerMaxDepth+1), nil},
		{"the latest address freed in another class",
			[]Event{alloc(0x1000, 8), free(0x1000), alloc(0x1000, 100)},
			[]uint64{step(0x1000), addrLastFreed}, []uint64{refOldest}, nil},
		{"realloc in place, same class",
			[]Event{alloc(0x1000, 16), realloc(0x1000, 0x1000, 20)},
			[]uint64{step(0x1000), depth(0)}, []uint64{refOldest}, nil},
		{"realloc in place, other class",
			[]Event{alloc(0x1000, 16), realloc(0x1000, 0x1000, 100)},
			[]uint64{step(0x1000), addrLastFreed}, []uint64{refOldest}, nil},
		{"realloc moving",
			[]Event{alloc(0x1000, 16), realloc(0x1000, 0x1020, 100), free(0x1020)},
			[]uint64{step(0x1000), step(0)}, []uint64{refOldest, refOldest}, nil},
		{"escapes",
			[]Event{free(0x7000), free(0x6ff0), realloc(0x8000, 0x8000, 8)},
			[]uint64{addrLastFreed}, []uint64{0, 0, 0}, []int64{0x7000, -0x10, 0x1010}},
		{"far steps escape",
			[]Event{alloc(1<<62+1, 8), alloc(1<<63+2, 8), alloc(1<<63+0x22, 8)},
			[]uint64{addrEscape, addrEscape, step(0)}, nil, []int64{1<<62 + 1, 1<<62 + 1}},
		{"a live address allocated again is freed first: a lost free",
			[]Event{alloc(0x1000, 8), alloc(0x1000, 8), free(0x1000), free(0x1000)},
			[]uint64{step(0x1000), depth(0)}, []uint64{refOldest, refOldest, refEscape}, []int64{0x1000}},
		{"a block freed before the latest 16 that is not the oldest is named by its handle",
			append(seqAllocs(18), free(0x1020), free(0x1000+17*0x20)),
			stepsOf(18), []uint64{refHandle + 1, refRecent}, nil},
		{"a block allocated before the latest 16 is named by its handle",
			append(seqAllocs(17), free(0x1000), free(0x1000+16*0x20)),
			stepsOf(17), []uint64{refOldest, refRecent}, nil},
		{"an address freed twice is live once: the second free escapes",
			[]Event{alloc(0x1000, 8), free(0x1000), free(0x1000), alloc(0x1000, 8)},
			[]uint64{step(0x1000), depth(0)}, []uint64{refOldest, refEscape}, []int64{0x1000}},
		{"a block of another thread than its own or its source's is not looked for",
			[]Event{talloc(1, 0x1000, 8), tfree(2, 0x1000), talloc(3, 0x2000, 8), talloc(3, 0x1000, 8)},
			[]uint64{step(0x1000), step(0x2000), addrLastFreed}, []uint64{refRecent}, nil},
		{"an address that dropped out of its list is fresh memory",
			append(append(append(seqAllocs(listSpan+1), frees(listSpan+1)...), alloc(0x2000, 8)), alloc(0x1000, 8)),
			append(stepsOf(listSpan+1), step(0x2000-0x1000-0x20*(listSpan+1)), step(-0x1020)),
			slices.Repeat([]uint64{refOldest}, listSpan+1), nil},
		{"processes apart",
			[]Event{alloc(0x1000, 8), {Kind: KindAlloc, Process: 2, Addr: 0x1000, Size: 8}, free(0x1000), {Kind: KindFree, Process: 2, Addr: 0x1000}},
			[]uint64{step(0x1000), step(0x1000)}, []uint64{refOldest, refOldest}, nil},
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

// TestClassLists checks that a class list keeps the addresses of its
// latest listSpan pushes that were not taken out, and finds them by depth.
func TestClassLists(t *testing.T) {
	var l classList
	if _, ok := l.takeAt(0); ok {
		t.Fatal("a new list has an address")
	}
	var want, pushes []uint64 // the list, the top last, and the push numbers
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range uint64(5 * listSpan) {
		// Some addresses are pushed twice: the depth of the latest push
		// is found.
		addr := i
		if i%5 == 0 && len(want) > 0 {
			addr = want[rng.IntN(len(want))]
		}
		dropped, didDrop := l.push(addr)
		if len(want) > 0 && pushes[0]+listSpan == i {
			// The push listSpan pushes ago dropped out, as it was
			// still there.
			if !didDrop || dropped != want[0] {
				t.Fatalf("push %d: dropped %d, %v, want %d", i, dropped, didDrop, want[0])
			}
			want, pushes = want[1:], pushes[1:]
		} else if didDrop {
			t.Fatalf("push %d dropped %d, which is not listSpan pushes old", i, dropped)
		}
		want, pushes = append(want, addr), append(pushes, i)
		if d := l.depthOf(addr, listSpan); d != 0 {
			t.Fatalf("push %d: the top is at depth %d", i, d)
		}
		if rng.IntN(3) == 0 && len(want) > 0 {
			d := rng.IntN(min(len(want), 300))
			if i%7 == 0 {
				d = len(want) - 1 // the bottom
			}
			k := len(want) - 1 - d
			shallowest := 0
			for want[len(want)-1-shallowest] != want[k] {
				shallowest++
			}
			if got := l.depthOf(want[k], listSpan); got != shallowest {
				t.Fatalf("push %d: depthOf(%d) = %d, want %d", i, want[k], got, shallowest)
			}
			// Below a limit, the depth is found only if it is below it.
			if limit := 1 + rng.IntN(300); l.depthOf(want[k], limit) != shallowest && shallowest < limit ||
				shallowest >= limit && l.depthOf(want[k], limit) != -1 {
				t.Fatalf("push %d: depthOf(%d, %d) = %d", i, want[k], limit, l.depthOf(want[k], limit))
			}
			if got, ok := l.takeAt(uint64(d)); !ok || got != want[k] {
				t.Fatalf("push %d: took %d at depth %d, want %d", i, got, d, want[k])
			}
			want, pushes = slices.Delete(want, k, k+1), slices.Delete(pushes, k, k+1)
		}
		if _, ok := l.takeAt(uint64(len(want))); ok {
			t.Fatalf("push %d: the list is deeper than %d", i, len(want))
		}
	}
	for d := len(want) - 1; d >= 0; d-- {
		if got, ok := l.takeAt(uint64(d)); !ok || got != want[len(want)-1-d] {
			t.Fatalf("depth %d at the end: %v", d, ok)
		}
	}
	if d := l.depthOf(0, listSpan); d != -1 {
		t.Fatalf("an empty list has 0 at depth %d", d)
	}
	l.reset()
	if _, ok := l.takeAt(0); ok {
		t.Fatal("a reset list has an address")
	}
	for size, class := range map[uint64]uint8{0: 2, 8: 2, 24: 2, 25: 3, 1000: 63, maxStackedSize: 255, maxStackedSize + 1: 0, math.MaxUint64: 0} {
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
