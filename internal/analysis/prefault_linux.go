package analysis

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// prefault maps the pages of b, fresh memory for the most part, in one
// call (MADV_POPULATE_WRITE), before they are written: one fault for each
// 4 KiB page of the heap table's arena costs far more on a big heap. It
// changes nothing in b; if the kernel cannot do it (before Linux 5.14),
// the pages fault in as they are written, as they would have.
func prefault(b []byte) {
	const page = 4096
	p := unsafe.Pointer(unsafe.SliceData(b))
	skip := int(-uintptr(p) & (page - 1)) // to the first page boundary
	n := (len(b) - skip) &^ (page - 1)
	if skip >= len(b) || n <= 0 {
		return
	}
	_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, skip)), n), unix.MADV_POPULATE_WRITE)
}
