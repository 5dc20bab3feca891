//go:build !linux

package pages

import "unsafe"

// Advise does nothing where the kernel takes no advice on huge pages.
func Advise(unsafe.Pointer, uintptr) {}

// prefault does nothing where the kernel has no way to map pages ahead.
func prefault(unsafe.Pointer, uintptr) {}
