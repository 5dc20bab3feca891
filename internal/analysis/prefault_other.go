//go:build !linux

package analysis

// prefault does nothing where the kernel has no way to map pages ahead.
func prefault([]byte) {}
