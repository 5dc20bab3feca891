package record

import (
	"bufio"
	"encoding/binary"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestParseScan reads a SCAN record with two stopped threads and two of
// the agent's mappings, and takes those out of a root range: before,
// between, after, overlapping its ends, and one that covers it all.
func TestParseScan(t *testing.T) {
	w := []uint64{0, 9, 100, 0x7000, 2, 0x9000, 0xa000, 2, 0x5000, 0x1000, 0x2000, 0x1000}
	sr := parseScan(w)
	if !slices.Equal(sr.sps, []uint64{0x7000, 0x9000, 0xa000}) || !slices.Equal(sr.own, [][2]uint64{{0x2000, 0x3000}, {0x5000, 0x6000}}) {
		t.Fatalf("parseScan: stack pointers %x, own mappings %x", sr.sps, sr.own)
	}
	for _, c := range []struct {
		lo, hi uint64
		want   [][2]uint64
	}{
		{0x1000, 0x8000, [][2]uint64{{0x1000, 0x2000}, {0x3000, 0x5000}, {0x6000, 0x8000}}},
		{0x2800, 0x5800, [][2]uint64{{0x3000, 0x5000}}},
		{0x2000, 0x3000, nil},
		{0x7000, 0x8000, [][2]uint64{{0x7000, 0x8000}}},
	} {
		if got := appendOutside(nil, c.lo, c.hi, sr.own); !slices.Equal(got, c.want) {
			t.Errorf("[%x, %x) outside the agent's mappings: %x, want %x", c.lo, c.hi, got, c.want)
		}
	}
	if sr := parseScan([]uint64{0, 9, 100, 0x7000, 5, 1}); len(sr.sps) != 1 || sr.own != nil {
		t.Errorf("a damaged record: stack pointers %x, own mappings %x", sr.sps, sr.own)
	}
}

// TestEndedDuringScanOnItsWayOut kills testdata/bigexit.c, which holds
// 512 MiB, and reads its memory until it is a zombie: while the kernel
// takes its memory back, reads fail (ESRCH) before the process is a
// zombie, and endedDuringScan must already say it ended (so the leak scan
// says the process ended while it was scanned, not only that a read
// failed: chromium's browser kills its renderers so).
func TestEndedDuringScanOnItsWayOut(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("testdata", "bigexit.c"), "-O2")
	cmd := exec.Command(prog)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("bigexit did not start: %v", err)
	}
	addr, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(line), "0x"), 16, 64)
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("bigexit printed %q", line)
	}
	pid := cmd.Process.Pid
	buf := make([]byte, 8)
	read := func() error {
		_, err := unix.ProcessVMReadv(pid, []unix.Iovec{{Base: &buf[0], Len: 8}}, []unix.RemoteIovec{{Base: uintptr(addr), Len: 8}}, 0)
		return err
	}
	if err := read(); err != nil {
		cmd.Process.Kill()
		t.Fatalf("reading bigexit's memory before the kill: %v", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	failed, wrong := 0, 0
	for {
		fields, ok := statFields(pid)
		if !ok || zombie(fields) {
			break
		}
		if read() != nil {
			failed++
			if !endedDuringScan(pid) {
				wrong++
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d failed reads of a killed process on its way out: endedDuringScan said it had not ended", wrong, failed)
	}
	t.Logf("%d reads failed before the process was a zombie", failed)
}

// TestPlanJoinsADenseBatch plans a batch of batchBlocks small blocks of a
// dense heap, each followed by a freed one, as bigheap's: its blocks are
// read as a few ranges, not a range each once the bytes between them
// pass a window, and those ranges hold each block and stay within the
// batch's blocks and gapBudget.
func TestPlanJoinsADenseBatch(t *testing.T) {
	bb := &blockBatch{}
	addr, bytes := uint64(0x10000), uint64(0)
	for k := range batchBlocks {
		size := 16 + uint64(k*5%7)*8
		bb.items = append(bb.items, scanItem{addr: addr, size: size})
		bytes += size
		addr += 2 * ((size + 8 + 15) &^ 15) // its chunk, and a freed one
	}
	bb.plan()
	if len(bb.los) > 2 {
		t.Errorf("%d blocks of %d bytes in all, spread over %d bytes: %d ranges, want at most 2", len(bb.items), bytes, addr-0x10000, len(bb.los))
	}
	var total uint64
	for i := range bb.los {
		total += bb.sizes[i]
		if bb.his[i]-bb.los[i] != bb.sizes[i] || i > 0 && bb.los[i] <= bb.his[i-1] {
			t.Fatalf("range %d: [%#x, %#x) of %d bytes, after one ending at %#x", i, bb.los[i], bb.his[i], bb.sizes[i], bb.his[max(i-1, 0)])
		}
	}
	if total > bytes+gapBudget+rangeGap {
		t.Errorf("the ranges hold %d bytes, more than the blocks' %d and the gap budget", total, bytes)
	}
	for _, b := range bb.items {
		i, _ := slices.BinarySearch(bb.his, b.addr+1)
		if i == len(bb.los) || b.addr < bb.los[i] || b.addr+b.size&^7 > bb.his[i] {
			t.Fatalf("block at %#x of %d bytes in no range", b.addr, b.size)
		}
	}
}

// TestSortByAddress sorts items in increasing, decreasing and mixed order
// of address, and one or none.
func TestSortByAddress(t *testing.T) {
	for _, addrs := range [][]uint64{nil, {8}, {8, 16, 32}, {32, 16, 8}, {16, 8, 32, 24}, {8, 24, 16}} {
		items := make([]scanItem, len(addrs))
		for i, a := range addrs {
			items[i] = scanItem{addr: a, size: a / 8}
		}
		sortByAddress(items)
		want := slices.Sorted(slices.Values(addrs))
		for i, it := range items {
			if it.addr != want[i] || it.size != it.addr/8 {
				t.Fatalf("%v sorted: %+v", addrs, items)
			}
		}
	}
}

// TestCollectAsFind looks up words that point at blocks' starts (the
// first of a page, the last, one after another), into their interiors,
// at the chunk header at a block's end, past blocks and outside the heap,
// through collect, and compares its hits with what find answers for each
// word: with and without blocks at odd addresses, which find looks at
// first (one of them over another block's start).
func TestCollectAsFind(t *testing.T) {
	for _, withOdd := range []bool{false, true} {
		live := newLiveSet(false)
		var starts []uint64
		for i := range 3000 {
			a := uint64(0x10000 + i*48)
			live.add(a, 16+uint64(i%5)*8)
			starts = append(starts, a)
		}
		live.add(0x100000, 3*pageSize) // bigger than a page
		live.add(0x200000, 100000)     // bigger than a page's sizes hold
		live.add(0x300000, 0)          // only its start points at it
		if withOdd {
			live.add(0x180003, 5)
			// Over another block's start: find answers the odd one.
			live.add(starts[100]-5, 32)
		}
		ix := newBlockIndex(&live.blocks)
		words := []uint64{0, 8, ix.lo - 8, ix.hi, ix.hi + 4096, 0x100000, 0x100008, 0x102ff8, 0x103000, 0x200000, 0x200000 + 99992, 0x300000, 0x300008, 0x180003, 0x180006, 0x180010}
		for i, a := range starts {
			words = append(words, a, a+8, a+16+uint64(i%5)*8-8, a+40)
		}
		buf := make([]byte, 8*len(words))
		for i, w := range words {
			binary.LittleEndian.PutUint64(buf[8*i:], w)
		}
		at := uint64(0x7000000)
		bb := &blockBatch{
			items: []scanItem{{addr: at, size: uint64(len(buf)), definite: true}},
			los:   []uint64{at}, his: []uint64{at + uint64(len(buf))}, sizes: []uint64{uint64(len(buf))},
			buf: buf, ok: true,
		}
		bb.f.ix = ix
		bb.collect()
		var want []hit
		var wantInner []innerPtr
		for _, v := range words {
			num, start, size, ok := ix.find(v)
			if !ok {
				continue
			}
			h := hit{start: start, num: num, size: uint32(min(size, hitSize)) | hitDefinite}
			if v != start {
				h.size |= hitInterior
				wantInner = append(wantInner, innerPtr{v: v, start: start, size: size, num: num, definite: true})
			}
			want = append(want, h)
		}
		if bb.err != nil || !slices.Equal(bb.hits, want) || !slices.Equal(bb.inner, wantInner) {
			t.Fatalf("odd block %v: %d hits, %d interior, error %v; find answers %d hits, %d interior", withOdd, len(bb.hits), len(bb.inner), bb.err, len(want), len(wantInner))
		}
		if len(wantInner) == 0 || len(want) < 2*len(starts) {
			t.Fatalf("odd block %v: only %d hits, %d interior: the test misses cases", withOdd, len(want), len(wantInner))
		}
	}
}

// TestFill fills slices of lengths around the powers of two that fill
// copies in.
func TestFill(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 1000, 1 << 16, 1<<16 + 1} {
		s := make([]uint8, n+1)
		fill(s[:n], 7)
		if i := slices.IndexFunc(s[:n], func(b uint8) bool { return b != 7 }); i >= 0 || s[n] != 0 {
			t.Fatalf("fill of %d bytes: byte %d not set, or the one after it (%d) set", n, i, s[n])
		}
	}
}

// TestReachableBytes sums pages of blocks all reachable, and refuses
// those with a block of any other state, in the words of eight states
// compared at once or after them, or a size in big.
func TestReachableBytes(t *testing.T) {
	for _, n := range []int{1, 7, 8, 9, 16, 21} {
		states, sizes := make([]uint8, n), make([]uint16, n)
		var want uint64
		for r := range n {
			states[r], sizes[r] = reachable, uint16(16+8*r)
			want += uint64(sizes[r])
		}
		if got, ok := reachableBytes(states, sizes); !ok || got != want {
			t.Fatalf("%d blocks all reachable: %d bytes, %v; want %d", n, got, ok, want)
		}
		for r := range n {
			for _, st := range []uint8{unreached, indirect, possible} {
				states[r] = st
				if _, ok := reachableBytes(states, sizes); ok {
					t.Fatalf("%d blocks, block %d in state %d: taken for all reachable", n, r, st)
				}
			}
			states[r] = reachable
			sizes[r] = bigBlock
			if _, ok := reachableBytes(states, sizes); ok {
				t.Fatalf("%d blocks, block %d of a size in big: taken for all reachable", n, r)
			}
			sizes[r] = uint16(16 + 8*r)
		}
	}
}

// TestWindowsOf checks the parts a block bigger than a window is read in
// (the classification of lost blocks reads them so): none bigger than a
// window, in order, covering the block exactly.
func TestWindowsOf(t *testing.T) {
	for _, size := range []uint64{1, 8, scanWindow - 1, scanWindow, scanWindow + 1, 3*scanWindow + 20, 5 << 30} {
		b := scanItem{addr: 0x7f0000001010, size: size, definite: true}
		parts := windowsOf(b)
		at := b.addr
		for i, p := range parts {
			if p.addr != at || p.size == 0 || p.size > scanWindow || !p.definite {
				t.Fatalf("size %d: part %d is %+v, want one from %#x of at most %d bytes", size, i, p, at, scanWindow)
			}
			at += p.size
		}
		if at != b.addr+size {
			t.Errorf("size %d: parts end at %#x, want %#x", size, at, b.addr+size)
		}
	}
}
