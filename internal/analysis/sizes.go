package analysis

// SizeCategory is one of mprof's four size categories, which its direct
// allocation table and call graph break allocations down by.
type SizeCategory int

const (
	Small      SizeCategory = iota // up to 32 bytes
	Medium                         // 33 to 256 bytes
	Large                          // 257 to 2048 bytes
	ExtraLarge                     // more than 2048 bytes

	SizeCategories = 4
)

// categoryOf returns the size category of an allocation of size bytes.
func categoryOf(size uint64) SizeCategory {
	switch {
	case size <= 32:
		return Small
	case size <= 256:
		return Medium
	case size <= 2048:
		return Large
	}
	return ExtraLarge
}

// SizeCount counts the allocations of one size category.
type SizeCount struct {
	Allocations uint64
	Bytes       uint64
	KeptBytes   uint64 // in use at exit
	KeptBlocks  uint64
}
