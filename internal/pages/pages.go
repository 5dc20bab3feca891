// Package pages asks the kernel to map memory ahead of use, and to back
// big arrays with huge pages: on a heap of millions of blocks, the
// recorder's and the analysis' tables cost a page fault for each 4 KiB
// they first touch, and a TLB miss at most steps of a random walk over
// them. Everything here is advice: a kernel that says no leaves the
// memory working as it would have.
package pages

import "unsafe"

// Huge is the size of a huge page (x86-64 and arm64 with 4 KiB pages):
// an array is backed by huge pages in the whole aligned 2 MiB spans it
// covers, so one shorter than two of them gains nothing.
const Huge = 2 << 20

// Slice returns make([]T, n, c), its memory backed by huge pages where
// the kernel has them to give (see Advise).
func Slice[T any](n, c int) []T {
	s := make([]T, n, c)
	Advise(unsafe.Pointer(unsafe.SliceData(s)), uintptr(c)*unsafe.Sizeof(*new(T)))
	return s
}

// Prefault maps the pages of b, fresh memory for the most part, in one
// call, before they are written. A page of fresh memory read before it is
// written costs two faults, the second with a TLB flush on every CPU the
// process runs on; one written first costs one fault; one mapped here
// costs none. It changes nothing in b.
func Prefault(b []byte) {
	if len(b) > 0 {
		prefault(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
	}
}

// Bytes returns the memory of *p as bytes, for Prefault.
func Bytes[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// SliceBytes returns the memory of the elements of s as bytes, for
// Prefault.
func SliceBytes[T any](s []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), uintptr(len(s))*unsafe.Sizeof(*new(T)))
}
