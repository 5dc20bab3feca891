package trace

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
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
		loopEvents(b, len(events), len(data), func() { readBench(b, data, len(events)) })
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
			loopEvents(b, len(events), len(data), func() { readBench(b, data, len(events)) })
		})
	}
}

// readBench reads a trace of the given number of events.
func readBench(b *testing.B, data []byte, events int) {
	if n := countEventsIn(b, data); n != events {
		b.Fatalf("read %d events, want %d", n, events)
	}
}

// countEventsIn reads a whole trace and returns how many events it holds,
// failing on damage: a benchmark of a damaged trace would measure the
// damage.
func countEventsIn(b *testing.B, data []byte) int {
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return n
		}
		if err != nil {
			b.Fatal(err)
		}
		if rec.Kind.IsEvent() {
			n++
		}
	}
}

// loopEvents runs do in the benchmark's loop, and reports what an event of
// a trace of events events in size bytes cost.
func loopEvents(b *testing.B, events, size int, do func()) {
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		do()
	}
	reportEvents(b, events, size, cpuTime()-cpu)
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

// sqliteLikeTrace returns the records, but Info, of a trace shaped like a
// real recording of sqlite3 building a table of 200,000 rows in memory,
// with the default time unit of 100 µs (Info{TimeUnit: 100_000}):
//
//  1. Start-up: 800 allocations of assorted sizes from 600 stacks, most of
//     them freed soon after, as sqlite sets itself up and compiles the
//     statement.
//  2. The table: for each row, five events from five stacks: a 16-byte
//     block allocated and grown in place to 24 bytes, the previous row's
//     such block freed, a 72-byte block allocated and the previous row's
//     freed. glibc serves them again and again from the same two chunks
//     of its per-size free lists. Every 48 rows, a 4368-byte page comes
//     from fresh memory at the top of the heap, and stays.
//  3. The end: the pages are freed in a burst.
//
// The 640 stacks are 4 to 31 frames deep and share their outer frames:
// 2,800 stack nodes, written just before the first event that uses them.
// They follow a random call graph of 400 return addresses in 9 modules.
// Symbols for the addresses used (one frame each, a few two, no files or
// lines), and 200 function names, come at the end, as the recorder writes
// them. Events are
// about 0.7 µs apart: 150 to a time unit.
//
// What it does not model: the real heap's layout (addresses come from a
// model of glibc's per-size free lists and top chunk, as in
// mallocDenseEvents), the order in which sqlite really touches its stacks
// during start-up, and the query that follows the inserts.
func sqliteLikeTrace() []Record {
	const (
		rows          = 200_000
		rowsPerPage   = 48
		startupAllocs = 800
		modules       = 9
	)
	rng := rand.New(rand.NewPCG(5, 6))
	var recs []Record
	add := func(r Record) { recs = append(recs, r) }

	add(Record{Kind: KindProcessStart, Process: &Process{ID: 1, PID: 4242, PPID: 1, Exe: "/usr/bin/sqlite3",
		Args: []string{"sqlite3", ":memory:"}, Cwd: "/home/me"}})
	add(Record{Kind: KindThread, Thread: &Thread{Process: 1, Index: 1, TID: 4242}})
	base := uint64(0x7ff7_f000_0000)
	for m := uint64(1); m <= modules; m++ {
		add(Record{Kind: KindObject, Object: &Object{ID: m, Path: fmt.Sprintf("/usr/lib/x86_64-linux-gnu/lib%d.so", m),
			BuildID: []byte{byte(m), 0xb1, 0xd0, 0x5e, 0x1a, 0x2b, 0x3c, 0x4d}}})
		base -= 0x20_0000 * (1 + uint64(rng.IntN(8)))
		add(Record{Kind: KindModule, Module: &Module{Process: 1, ID: m, Object: m, Base: base, Time: 2_700_000 + m*130,
			Segments: []Segment{{0, 0x7000, 0, SegmentRead}, {0x8000, 0x2d9c1, 0x8000, SegmentRead | SegmentExec},
				{0x36000, 0x1240, 0x36000, SegmentRead}, {0x494d8, 0x2348, 0x484d8, SegmentRead | SegmentWrite}}}})
	}

	// The call graph: 400 return addresses, 45 in each module, each
	// calling one or two others, in its own module four times out of
	// five. Address 0 is the outermost frame of every stack.
	type address struct{ object, offset uint64 }
	var returns []address
	var callees [][]int
	for m := range uint64(modules) {
		for range 45 {
			returns = append(returns, address{m + 1, 0x1000 + uint64(rng.IntN(0x13_0000))})
		}
	}
	for range returns {
		var to []int
		for range 1 + rng.IntN(2) {
			callee := rng.IntN(len(returns))
			if rng.IntN(5) > 0 {
				callee = callee - callee%45 + rng.IntN(45)
			}
			to = append(to, callee)
		}
		callees = append(callees, to)
	}
	var nodes []StackNode // nodes[id-1]
	var depth, at []int   // of each node, and its return address
	written := map[uint64]bool{}
	newStack := func(stacks []uint64) uint64 {
		want := 4 + rng.IntN(10) + rng.IntN(10) + rng.IntN(9)
		parent, d := uint64(0), 0
		if len(stacks) > 0 {
			// Share the outer frames of an existing stack.
			s := stacks[rng.IntN(len(stacks))]
			keep := max(1, want-1-rng.IntN(8))
			for depth[s-1] > keep {
				s = nodes[s-1].Parent
			}
			parent, d = s, depth[s-1]
		}
		for ; d < want; d++ {
			ret := 0
			if parent != 0 {
				from := callees[at[parent-1]]
				ret = from[rng.IntN(len(from))]
			}
			id := uint64(len(nodes) + 1)
			nodes = append(nodes, StackNode{Process: 1, ID: id, Parent: parent, Module: returns[ret].object,
				Offset: returns[ret].offset})
			depth, at = append(depth, d+1), append(at, ret)
			parent = id
		}
		return parent
	}
	var stacks []uint64
	for range 640 {
		stacks = append(stacks, newStack(stacks))
	}
	// use writes the nodes of a stack that are not written yet, outermost
	// first.
	use := func(stack uint64) uint64 {
		var chain []uint64
		for n := stack; n != 0 && !written[n]; n = nodes[n-1].Parent {
			chain = append(chain, n)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			written[chain[i]] = true
			add(Record{Kind: KindStackNode, StackNode: &nodes[chain[i]-1]})
		}
		return stack
	}

	// glibc's per-size free lists (LIFO, as its tcache) and top chunk.
	freeChunks := map[uint64][]uint64{}
	heapTop := uint64(0x55a5_0340_0000)
	malloc := func(size uint64) uint64 {
		chunk := max(32, (size+8+15)&^15)
		if list := freeChunks[chunk]; len(list) > 0 {
			freeChunks[chunk] = list[:len(list)-1]
			return list[len(list)-1]
		}
		addr := heapTop + 16
		heapTop += chunk
		return addr
	}
	release := func(addr, size uint64) {
		chunk := max(32, (size+8+15)&^15)
		freeChunks[chunk] = append(freeChunks[chunk], addr)
	}
	now := uint64(2_800_000)
	event := func(e Event) {
		e.Process, e.Thread, e.Time = 1, 1, now
		e.Stack = use(e.Stack)
		add(Record{Kind: e.Kind, Event: e})
	}
	alloc := func(size, stack uint64) uint64 {
		addr := malloc(size)
		event(Event{Kind: KindAlloc, API: APIMalloc, Addr: addr, Size: size, Stack: stack})
		return addr
	}
	free := func(addr, size, stack uint64) {
		release(addr, size)
		event(Event{Kind: KindFree, API: APIFree, Addr: addr, Stack: stack})
	}

	// 1. Start-up.
	startupSizes := []uint64{16, 24, 32, 40, 64, 72, 88, 96, 104, 112, 120, 136, 200, 256, 384, 512, 1024, 4104, 17824}
	type block struct{ addr, size uint64 }
	var live []block
	for range startupAllocs {
		now += uint64(rng.IntN(12_000))
		if len(live) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(live))
			free(live[i].addr, live[i].size, stacks[5+rng.IntN(len(stacks)-5)])
			live = append(live[:i], live[i+1:]...)
		}
		size := startupSizes[rng.IntN(len(startupSizes))]
		live = append(live, block{alloc(size, stacks[5+rng.IntN(len(stacks)-5)]), size})
	}

	// 2. The table.
	var pages []uint64
	var prev16, prev72 uint64
	for row := range rows {
		step := func() { now += uint64(rng.IntN(1380)) }
		step()
		a16 := alloc(16, stacks[0])
		step()
		event(Event{Kind: KindRealloc, API: APIRealloc, OldAddr: a16, Addr: a16, Size: 24, Stack: stacks[1]})
		if prev16 != 0 {
			step()
			free(prev16, 24, stacks[2])
		}
		step()
		a72 := alloc(72, stacks[3])
		if prev72 != 0 {
			step()
			free(prev72, 72, stacks[4])
		}
		prev16, prev72 = a16, a72
		if row%rowsPerPage == 0 {
			step()
			pages = append(pages, alloc(4368, stacks[5]))
		}
	}

	// 3. The end.
	for _, page := range pages {
		now += uint64(rng.IntN(200))
		free(page, 4368, stacks[6])
	}

	// Symbols, sorted by object and offset; a new function every other
	// address or so.
	var addrs []address
	seen := map[address]bool{}
	for _, n := range nodes {
		a := address{n.Module, n.Offset}
		if written[n.ID] && !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	slices.SortFunc(addrs, func(a, b address) int {
		if a.object != b.object {
			return cmp.Compare(a.object, b.object)
		}
		return cmp.Compare(a.offset, b.offset)
	})
	words := []string{"Btree", "Pager", "Vdbe", "Exec", "Insert", "Cursor", "Malloc", "Realloc", "Parse", "Expr",
		"Select", "Table", "Index", "Column", "Record", "Make", "Free", "Open", "Close", "Step", "Mem", "Str", "Page",
		"Cache", "Fetch", "Move", "To", "Get", "Set", "Value"}
	function := uint64(0)
	for i, a := range addrs {
		if i == 0 || a.object != addrs[i-1].object || rng.IntN(2) == 0 {
			function++
			name := "sqlite3"
			for range 2 + rng.IntN(3) {
				name += words[rng.IntN(len(words))]
			}
			add(Record{Kind: KindString, String: &String{ID: function, Value: name}})
		}
		frames := []Frame{{Function: function}}
		if rng.IntN(20) == 0 {
			frames = append([]Frame{{Function: 1 + uint64(rng.IntN(int(function)))}}, frames...)
		}
		add(Record{Kind: KindSymbol, Symbol: &Symbol{Object: a.object, Offset: a.offset, Frames: frames}})
	}
	for m := uint64(1); m <= modules; m++ {
		add(Record{Kind: KindObjectStatus, ObjectStatus: &ObjectStatus{Object: m, Status: SymbolsNoDebug}})
	}
	add(Record{Kind: KindProcessEnd, ProcessEnd: &ProcessEnd{ID: 1, Time: now, How: EndExited}})
	return recs
}

// sqliteLikeInfo is the Info of sqliteLikeTrace: the recorder's default
// time unit.
var sqliteLikeInfo = Info{TimeUnit: 100_000}

// writeRecords writes the records of a trace with the settings of a
// recording: compressed blocks of the default size.
func writeRecords(tb testing.TB, out io.Writer, info Info, recs []Record) {
	w, err := NewWriter(out, info)
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}

func countEvents(recs []Record) int {
	n := 0
	for _, r := range recs {
		if r.Kind.IsEvent() {
			n++
		}
	}
	return n
}

// BenchmarkSQLiteLike writes and reads the trace of sqliteLikeTrace.
func BenchmarkSQLiteLike(b *testing.B) {
	recs := sqliteLikeTrace()
	events := countEvents(recs)
	var buf bytes.Buffer
	writeRecords(b, &buf, sqliteLikeInfo, recs)
	data := buf.Bytes()
	b.Run("writer", func(b *testing.B) {
		loopEvents(b, events, len(data), func() { writeRecords(b, io.Discard, sqliteLikeInfo, recs) })
	})
	b.Run("reader", func(b *testing.B) {
		loopEvents(b, events, len(data), func() { readBench(b, data, events) })
	})
}

// TestSQLiteLikeSize guards the size of the sqlite-like trace, records and
// all. (It takes 0.039 bytes per event; the real recording it models takes
// 0.043.)
func TestSQLiteLikeSize(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a million events")
	}
	recs := sqliteLikeTrace()
	var buf bytes.Buffer
	writeRecords(t, &buf, sqliteLikeInfo, recs)
	if perEvent := float64(buf.Len()) / float64(countEvents(recs)); perEvent > 0.045 {
		t.Errorf("the sqlite-like trace takes %.4f bytes per event, want at most 0.045", perEvent)
	}
}
