package record_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/memtrail/memtrail/internal/fixture"
)

// bigLeaks is the shape testdata/bigleaks.c builds: its arguments, in
// their order.
type bigLeaks struct {
	keys, tree, lists, listLen, rings, ringLen, interior int64
}

func (s bigLeaks) args() []string {
	var args []string
	for _, n := range []int64{s.keys, s.tree, s.lists, s.listLen, s.rings, s.ringLen, s.interior} {
		args = append(args, fmt.Sprint(n))
	}
	return args
}

// want returns the classes the construction bigleaks.c describes implies.
func (s bigLeaks) want() fixture.LeakSummary {
	var w fixture.LeakSummary
	reachable := func(bytes int64) { w.StillReachableBytes += uint64(bytes); w.StillReachableBlocks++ }
	definitely := func(bytes int64) { w.DefinitelyLostBytes += uint64(bytes); w.DefinitelyLostBlocks++ }
	indirectly := func(bytes int64) { w.IndirectlyLostBytes += uint64(bytes); w.IndirectlyLostBlocks++ }
	// 1. The hash table: its buckets, and the keys not divisible by 3.
	const buckets = 65536
	reachable(buckets * 8)
	for k := range s.keys {
		if k%3 != 0 {
			reachable(24 + 8*(k%4))
		}
	}
	// 2. The tree.
	for range s.tree {
		reachable(32)
	}
	// 3. The lists: each head definitely lost, and in every tenth list
	// the node after the freed middle one too.
	for l := range s.lists {
		cut := l%10 == 0
		for j := range s.listLen {
			g := l*s.listLen + j
			size := 40 + 8*(g%3)
			switch {
			case cut && j == s.listLen/2:
				// freed
			case j == 0 || cut && j == s.listLen/2+1:
				definitely(size)
			default:
				indirectly(size)
			}
		}
	}
	// 4. The rings: one node of each definitely lost.
	for range s.rings {
		definitely(56)
		for range s.ringLen - 1 {
			indirectly(56)
		}
	}
	// 5. The blocks kept by interior pointers, and their array.
	for range s.interior {
		w.PossiblyLostBytes += 72
		w.PossiblyLostBlocks++
	}
	reachable(s.interior * 8)
	return w
}

// TestBigLeaksEqualValgrind records a program that leaves over a million
// blocks at exit in all four classes, in the shapes real programs leave
// them (a hash table with holes, a tree, lost lists some cut in the
// middle, lost cycles, blocks kept by interior pointers), and compares
// the classes of the recorder's scan with memcheck's and with those the
// program's construction implies, bytes and blocks.
func TestBigLeaksEqualValgrind(t *testing.T) {
	if testing.Short() {
		t.Skip("records and runs under valgrind a program with a million blocks live at exit")
	}
	shape := bigLeaks{keys: 600000, tree: 250000, lists: 2500, listLen: 100, rings: 1000, ringLen: 50, interior: 100000}
	want := shape.want()
	if live := want.DefinitelyLostBlocks + want.IndirectlyLostBlocks + want.PossiblyLostBlocks + want.StillReachableBlocks; live < 1000000 {
		t.Fatalf("the shape leaves %d blocks live at exit, want at least 1,000,000", live)
	}
	prog := fixture.Build(t, src("bigleaks.c"))
	args := append([]string{prog}, shape.args()...)

	// memcheck has, a few times under a heavily loaded machine (never
	// alone), called some 50 of the lost lists' nodes possibly lost:
	// the oracle is asked up to three times, and one answer that agrees
	// with the construction is needed.
	var vg []fixture.HeapSummary
	for try := 1; ; try++ {
		vg = fixture.Valgrind(t, args...)
		if len(vg) != 1 {
			t.Fatalf("valgrind saw %d processes, want 1", len(vg))
		}
		if vg[0].Leaks == want {
			break
		}
		if try == 3 {
			t.Fatalf("memcheck's classes %+v three times, the construction's %+v", vg[0].Leaks, want)
		}
		t.Logf("memcheck's classes %+v, the construction's %+v: asking again", vg[0].Leaks, want)
	}

	rec := recordArgs(t, "", args...)
	scans := leakScans(t, rec.res.Path)
	if len(scans) != 1 {
		t.Fatalf("%d scans, want 1", len(scans))
	}
	scan := scans[1]
	if scan.Error != "" {
		t.Fatalf("no scan: %s", scan.Error)
	}
	got := classesOf(scan)
	if got != vg[0].Leaks {
		t.Errorf("memtrail's classes %+v, valgrind's %+v", got, vg[0].Leaks)
	}
	if got != want {
		t.Errorf("memtrail's classes %+v, the construction's %+v", got, want)
	}
	t.Logf("%+v; scanned in %v", got, time.Duration(scan.Duration))
}
