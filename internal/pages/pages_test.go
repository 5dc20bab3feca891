package pages

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// TestPrefault checks that Prefault changes nothing in what it maps, over
// whole pages, parts of pages and nothing.
func TestPrefault(t *testing.T) {
	buf := make([]byte, 5*4096+100)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for _, r := range [][2]int{{0, len(buf)}, {1, 4097}, {100, 200}, {3, 3}, {4095, 3 * 4096}} {
		Prefault(buf[r[0]:r[1]])
	}
	for i := range buf {
		if buf[i] != byte(i*7) {
			t.Fatalf("byte %d changed to %d", i, buf[i])
		}
	}
	Prefault(nil)
}

// TestSlice checks that Slice gives a zeroed slice of the length and
// capacity asked for, and, on Linux, that the mapping of a big one
// carries the huge-page advice (VmFlags "hg" in /proc/self/smaps).
func TestSlice(t *testing.T) {
	s := Slice[uint64](10, 3*Huge/8)
	if len(s) != 10 || cap(s) != 3*Huge/8 {
		t.Fatalf("len %d cap %d", len(s), cap(s))
	}
	for i, v := range s[:cap(s)] {
		if v != 0 {
			t.Fatalf("word %d is %d", i, v)
		}
	}
	small := Slice[byte](5, 100)
	if len(small) != 5 || cap(small) != 100 {
		t.Fatalf("small: len %d cap %d", len(small), cap(small))
	}
	if runtime.GOOS != "linux" {
		return
	}
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err != nil {
		t.Skipf("a kernel without transparent huge pages refuses the advice: %v", err)
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	mid := (start + Huge - 1) &^ (Huge - 1) // inside the advised span
	flags, err := vmFlags(mid)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("the mapping at %#x has VmFlags %q, without hg", mid, flags)
	}
	runtime.KeepAlive(s)
}

// vmFlags returns the VmFlags line of the mapping that holds addr.
func vmFlags(addr uintptr) (string, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return "", err
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:")), nil
		}
	}
	return "", fmt.Errorf("no mapping holds %#x", addr)
}

// TestSliceBytes checks that SliceBytes covers exactly the elements of a
// slice, and nothing of an empty one.
func TestSliceBytes(t *testing.T) {
	type pair struct{ a, b uint32 }
	s := make([]pair, 3, 10)
	b := SliceBytes(s)
	if len(b) != 3*8 || unsafe.Pointer(&b[0]) != unsafe.Pointer(&s[0]) {
		t.Fatalf("%d bytes at %p, want 24 at %p", len(b), &b[0], &s[0])
	}
	if n := len(SliceBytes([]pair(nil))); n != 0 {
		t.Fatalf("%d bytes of a nil slice", n)
	}
	if n := len(Bytes(&s[1])); n != 8 {
		t.Fatalf("Bytes: %d bytes of a pair", n)
	}
}
