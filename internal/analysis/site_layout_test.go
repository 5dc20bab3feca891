package analysis

import (
	"testing"
	"unsafe"
)

// TestSiteLayout checks what Site's comment promises: the counters every
// allocation and free changes share the first 64 bytes, and a Site fills
// whole cache lines.
func TestSiteLayout(t *testing.T) {
	var s Site
	if size := unsafe.Sizeof(s); size%64 != 0 {
		t.Errorf("Site is %d bytes, not a multiple of 64", size)
	}
	hot := map[string]uintptr{
		"liveBytes": unsafe.Offsetof(s.liveBytes), "liveBlocks": unsafe.Offsetof(s.liveBlocks),
		"epoch": unsafe.Offsetof(s.epoch), "Allocations": unsafe.Offsetof(s.Allocations),
		"BytesAllocated": unsafe.Offsetof(s.BytesAllocated), "Frees": unsafe.Offsetof(s.Frees),
		"Temporary": unsafe.Offsetof(s.Temporary),
	}
	for name, off := range hot {
		if off+8 > 64 {
			t.Errorf("Site.%s is at byte %d, past the first cache line", name, off)
		}
	}
}
