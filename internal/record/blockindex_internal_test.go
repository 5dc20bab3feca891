package record

import (
	"fmt"
	"math/rand"
	"sync"
	"testing"
)

// TestFindersAgree looks up random addresses in and around random blocks
// with the index's own finder and, at the same time, with finders of two
// other goroutines (find and findStart), and checks that they agree:
// findStart leaves out only the size of a block whose start is asked for.
func TestFindersAgree(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	var tb blockTable
	var addrs []uint64
	at := uint64(0x10_0000_0000)
	for range 20000 {
		at += 16 * uint64(1+r.Intn(4))
		if r.Intn(500) == 0 {
			at += uint64(r.Intn(1<<24)) &^ 15 // another chunk
		}
		size := uint64(r.Intn(96))
		if r.Intn(200) == 0 {
			size = uint64(r.Intn(1 << 17)) // over a page, and over 16 bits
		}
		tb.put(at, size)
		addrs = append(addrs, at)
		at += size
		if r.Intn(300) == 0 {
			tb.put(at+19, 5) // an odd one
			addrs = append(addrs, at+19)
			at += 32
		}
	}
	ix := newBlockIndex(&tb)
	probes := make([]uint64, 100000)
	for i := range probes {
		a := addrs[r.Intn(len(addrs))]
		probes[i] = a + uint64(r.Intn(256)) - 64
		if r.Intn(3) == 0 {
			probes[i] = a
		}
	}
	type found struct {
		num         uint32
		start, size uint64
		ok          bool
	}
	want := make([]found, len(probes))
	for i, v := range probes {
		w := &want[i]
		w.num, w.start, w.size, w.ok = ix.find(v)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 2)
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := finder{ix: ix}
			for i, v := range probes {
				var got found
				if g == 0 {
					got.num, got.start, got.size, got.ok = f.find(v)
				} else if got.num, got.start, got.size, got.ok = f.findStart(v); got.ok && got.size == 0 && v == got.start {
					got.size = want[i].size
				}
				if got != want[i] {
					errs <- fmt.Sprintf("finder %d: %#x: %+v, want %+v", g, v, got, want[i])
					return
				}
			}
		}()
	}
	for i, v := range probes { // the index's own finder meanwhile
		if num, start, size, ok := ix.find(v); (found{num, start, size, ok}) != want[i] {
			t.Fatalf("find(%#x) changed between two looks", v)
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
