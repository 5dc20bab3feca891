package record

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/trace"
)

var (
	heldBlocks   = flag.Int("held-blocks", 1000000, "blocks of the heaps BenchmarkScanHeld scans")
	heldInflight = flag.Int("held-inflight", 0, "batches BenchmarkScanHeld reads at once (0: the default)")
)

// heldHeap starts testdata/heldheap.c with how, n blocks and seed, and
// returns its pid, the values of the globals that keep its blocks and its
// live blocks once it holds still. It runs until the test ends.
func heldHeap(tb testing.TB, how string, n int, seed int64) (pid int, roots []uint64, live *liveSet) {
	tb.Helper()
	prog := fixture.Build(tb, filepath.Join("testdata", "heldheap.c"), "-O2", "-g")
	file := filepath.Join(tb.TempDir(), "live")
	cmd := exec.Command(prog, how, fmt.Sprint(n), fmt.Sprint(seed), file)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		tb.Fatalf("heldheap %s %d: %q, %v", how, n, line, err)
	}
	f, err := os.Open(file)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	live = newLiveSet(false)
	r := bufio.NewReaderSize(f, 1<<20)
	var rec [16]byte
	if _, err := io.ReadFull(r, rec[:8]); err != nil {
		tb.Fatalf("reading heldheap's roots: %v", err)
	}
	roots = make([]uint64, binary.LittleEndian.Uint64(rec[:8]))
	if err := binary.Read(r, binary.LittleEndian, roots); err != nil {
		tb.Fatalf("reading heldheap's roots: %v", err)
	}
	for {
		if _, err := io.ReadFull(r, rec[:]); err == io.EOF {
			break
		} else if err != nil {
			tb.Fatalf("reading heldheap's live blocks: %v", err)
		}
		live.add(binary.LittleEndian.Uint64(rec[:8]), binary.LittleEndian.Uint64(rec[8:]))
	}
	return cmd.Process.Pid, roots, live
}

// BenchmarkScanHeld scans heaps of -held-blocks blocks held still:
// bigheap's, and a list in random order of address. Besides the time, it
// reports the CPU time of the whole process and of the scan's own
// goroutine (on a thread of its own), which the machine's other work
// changes less than the time.
func BenchmarkScanHeld(b *testing.B) {
	for _, how := range []string{"bigheap", "list"} {
		b.Run(how, func(b *testing.B) {
			pid, _, live := heldHeap(b, how, *heldBlocks, 1)
			if *heldInflight > 0 {
				defer func(old int) { inflightBatches = old }(inflightBatches)
				inflightBatches = *heldInflight
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var self0, thread0 unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &self0)
			unix.Getrusage(unix.RUSAGE_THREAD, &thread0)
			b.ResetTimer()
			defer func() {
				var self1, thread1 unix.Rusage
				unix.Getrusage(unix.RUSAGE_SELF, &self1)
				unix.Getrusage(unix.RUSAGE_THREAD, &thread1)
				cpu := func(r0, r1 *unix.Rusage) float64 {
					ns := r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano()
					return float64(ns) / 1e6 / float64(b.N)
				}
				b.ReportMetric(cpu(&self0, &self1), "cpu-ms/op")
				b.ReportMetric(cpu(&thread0, &thread1), "scanner-ms/op")
			}()
			for range b.N {
				res, err := scanMemory(pid, live, scanRecord{sps: []uint64{0}}, "")
				if err != nil {
					b.Fatal(err)
				}
				if res.blocks[trace.StillReachable] == 0 {
					b.Fatalf("no block reachable: %+v", res.blocks)
				}
			}
		})
	}
}

// TestScanHeldMarksAsPlainSearch marks the heaps of a real process held
// still (random graphs of blocks with pointers to starts and interiors,
// a list in random order of address, bigheap's array of blocks, bigger
// than a window) from the values of its globals, with one to four batches
// read at once, with and without a sweep, and compares each block's state
// with a plain search over a Go map of the blocks, reading the process's
// memory a page at a time.
func TestScanHeldMarksAsPlainSearch(t *testing.T) {
	defer func(old int) { inflightBatches = old }(inflightBatches)
	for _, c := range []struct {
		how  string
		n    int
		seed int64
	}{{"mixed", 20000, 1}, {"mixed", 50000, 2}, {"mixed", 3000, 3}, {"list", 20000, 4}, {"bigheap", 300000, 5}} {
		pid, roots, live := heldHeap(t, c.how, c.n, c.seed)
		var addrs, sizes []uint64
		live.blocks.each(func(addr, size uint64) {
			addrs, sizes = append(addrs, addr), append(sizes, size)
		})
		mem := &processMemory{pid: pid}
		pages := map[uint64][]byte{}
		word := func(a uint64) uint64 {
			page := a &^ (pageSize - 1)
			b, ok := pages[page]
			if !ok {
				read, err := mem.read(page, pageSize)
				if err != nil {
					t.Fatalf("%s: reading %#x: %v", c.how, page, err)
				}
				b = append([]byte(nil), read...)
				pages[page] = b
			}
			return wordAt(b, a-page)
		}
		want := plainMark(addrs, sizes, roots, word)
		ix := newBlockIndex(&live.blocks)
		ms, err := readMaps(pid)
		if err != nil {
			t.Fatal(err)
		}
		for readers := 1; readers <= 4; readers++ {
			for _, sweep := range []bool{false, true} {
				inflightBatches = readers
				m := markFrom(pid, ix, ms, roots, sweep)
				if m.err != nil {
					t.Fatalf("%s %d, %d batches at once, sweep %v: %v", c.how, c.n, readers, sweep, m.err)
				}
				counts := map[uint8]int{}
				for k, a := range addrs {
					num, _, _, _ := ix.find(a)
					if m.state[num] != want[a] {
						t.Fatalf("%s %d, %d batches at once, sweep %v: block %d of %d at %#x: state %d, want %d", c.how, c.n, readers, sweep, k, len(addrs), a, m.state[num], want[a])
					}
					counts[m.state[num]]++
				}
				if readers == 1 && !sweep {
					t.Logf("%s %d: %d blocks unreached, %d possibly lost, %d reachable", c.how, c.n, counts[unreached], counts[possible], counts[reachable])
				}
			}
		}
	}
}
