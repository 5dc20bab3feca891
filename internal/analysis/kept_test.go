package analysis

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
)

// TestKeptInHalves checks that the blocks live at the end, gone over in
// two halves at once, make the same model as in one pass: the kept bytes
// and blocks by site, size category and bin, and the object lists (short,
// so that each half cuts its own).
func TestKeptInHalves(t *testing.T) {
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Info{TimeUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.ProcessStart(trace.Process{ID: 1, PID: 100}))
	for i := uint64(1); i <= 64; i++ {
		must(w.StackNode(trace.StackNode{Process: 1, ID: i, Parent: i / 2, Module: 1, Offset: i * 16}))
	}
	// Blocks over hundreds of 2 MiB of address space, so that both
	// halves have some, of sizes in every category, some freed; the
	// trace's last blocks are still in its latest trace block.
	const n = 20_000
	addr := func(i int) uint64 { return 0x5555_0000_0000 + uint64(i*7919%n)*24<<10 }
	for i := range n {
		must(w.Event(trace.Event{Kind: trace.KindAlloc, Process: 1, Thread: 1, Time: uint64(i),
			API: trace.APIMalloc, Addr: addr(i), Size: uint64(1 + i*37%5000), Stack: uint64(1 + i%64)}))
		if i%3 == 0 && i > 100 {
			must(w.Event(trace.Event{Kind: trace.KindFree, Process: 1, Thread: 1, Time: uint64(i),
				API: trace.APIFree, Addr: addr(i - 100), Stack: 2}))
		}
		if i%1000 == 999 && i < n-1000 {
			must(w.Flush()) // the blocks go into the address index
		}
	}
	must(w.Close())
	// analyze is Analyze, and says how many blocks the address index
	// holds at the end.
	analyze := func() (*Model, int) {
		r, err := trace.NewReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		a := newAnalyzer(Options{Objects: 7})
		for {
			events, rec, err := r.NextBatch()
			if errors.Is(err, io.EOF) {
				break
			}
			must(err)
			if len(events) > 0 {
				a.events(events)
			} else {
				a.record(rec)
			}
		}
		indexed := a.procs[1].heap.indexNow().Len()
		return a.finish(), indexed
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	old := keptApart
	defer func() { keptApart = old }()
	keptApart = 1 << 62
	whole, _ := analyze()
	keptApart = 1000
	halves, indexed := analyze()
	if !SameModels(whole, halves) {
		t.Errorf("in halves, the model differs: %s", DiffModels(whole, halves))
	}
	if p := halves.Processes[0]; len(p.LiveObjects) != 7 || p.Sites[0].BySize[Small].KeptBlocks == 0 || indexed < keptApart {
		t.Errorf("%d live objects, %d small blocks kept from the first site, %d indexed: the trace is not what the test needs",
			len(p.LiveObjects), p.Sites[0].BySize[Small].KeptBlocks, indexed)
	}
}
