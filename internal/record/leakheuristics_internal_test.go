package record

import (
	"os"
	"runtime"
	"testing"
	"unsafe"
)

// TestWordsAt reads words of this process as the heuristics read the
// program's: in any order, repeated, near each other (one range) and far
// apart (several, more than a batch of them), and one that cannot be
// read, which is 0.
func TestWordsAt(t *testing.T) {
	mem := make([]uint64, 1<<20) // 8 MiB: ranges of 64 KiB at most
	for i := range mem {
		mem[i] = uint64(i)*3 + 1
	}
	base := uint64(uintptr(unsafe.Pointer(&mem[0])))
	var addrs, want []uint64
	add := func(i int) {
		addrs, want = append(addrs, base+uint64(i)*8), append(want, mem[i])
	}
	for i := len(mem) - 1; i >= 0; i -= 997 { // descending, 8 KiB apart
		add(i)
	}
	for i := 0; i < 4096; i += 3 { // dense
		add(i)
		add(i)
	}
	addrs, want = append(addrs, 8), append(want, 0) // page 0: unreadable
	got := (&processMemory{pid: os.Getpid()}).wordsAt(addrs)
	runtime.KeepAlive(mem)
	for k := range addrs {
		if got[k] != want[k] {
			t.Fatalf("word %d at %#x: %d, want %d", k, addrs[k], got[k], want[k])
		}
	}
}
