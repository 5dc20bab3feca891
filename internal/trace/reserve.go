package trace

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The tables of a process's heap state (handles and their serial numbers,
// the pages of the address table) grow to tens of MiB on programs with
// big heaps. Grown by append, every doubling copies them into memory the
// kernel has to fault in and clear, and that stalls the recorder while the
// program's rings fill: on python3 (bench/) it was half of the time the
// program waited for memtrail. Past reserveAfter bytes, a table moves
// to a reservation of address space outside the Go heap, which the kernel
// backs with zeroed pages only as they are first written: it grows
// without copying and without faulting a page twice. (The Writer also
// keeps the stream sets of its blocks, see pipeline.spare.) Recording
// python3, memtrail's CPU time fell by 6%, the time the program waited for
// it by 30% and memtrail's peak RSS from 245 to 193 MB; recording jq, its
// CPU time fell by 13% and the waits by 45%.

// reserveAfter is the size in bytes at which a table moves to a
// reservation: counted in bytes, not entries, so that the pages of the
// address table (a KiB each) move as early as the handles, rather than
// doubling to 16 MiB in the Go heap first and leaving the garbage of each
// doubling behind.
const reserveAfter = 256 << 10

// full reports whether table s, not in a reservation yet (moved), should
// move to one before it grows again.
func full[T any](s []T, moved bool) bool {
	var zero T
	return !moved && len(s) == cap(s) && len(s)*int(unsafe.Sizeof(zero)) >= reserveAfter
}

// reserved returns s moved into a reservation with room for n values,
// which is released once owner is unreachable; or s itself if the
// reservation could not be made (it then grows as Go slices do). T must
// hold no pointers.
func reserved[T, O any](s []T, n int, owner *O) []T {
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return s
	}
	runtime.AddCleanup(owner, func(m []byte) { unix.Munmap(m) }, mem)
	return append(unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(mem))), n)[:0], s...)
}
