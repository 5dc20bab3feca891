package pages

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Advise marks the aligned huge-page spans of the size bytes at p for huge
// pages (MADV_HUGEPAGE), where the kernel leaves that to the program
// (transparent_hugepage "madvise"). Spans of less than two huge pages are
// left alone: the advice splits the mapping, and gains too little there.
func Advise(p unsafe.Pointer, size uintptr) {
	if size < 2*Huge {
		return
	}
	start := uintptr(p)
	lo, hi := (start+Huge-1)&^(Huge-1), (start+size)&^(Huge-1)
	unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_HUGEPAGE)
}

// prefault maps the whole pages of the size bytes at p with
// MADV_POPULATE_WRITE (Linux 5.14 and later; earlier kernels say no, and
// the pages fault in as they are written).
func prefault(p unsafe.Pointer, size uintptr) {
	const page = 4096
	start := uintptr(p)
	lo, hi := (start+page-1)&^(page-1), (start+size)&^(page-1)
	if lo >= hi {
		return
	}
	unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_POPULATE_WRITE)
}
