package trace

import (
	"runtime"
	"testing"
)

// TestReserved checks that a table moved to a reservation keeps its
// values, grows in place up to the reservation's room and as a Go slice
// past it, and that a heap state's tables move once they are big.
func TestReserved(t *testing.T) {
	owner := new(int)
	s := reserved([]uint32{1, 2, 3}, 8, owner)
	if len(s) != 3 || cap(s) != 8 || s[0] != 1 || s[2] != 3 {
		t.Fatalf("reserved: len %d, cap %d, %v", len(s), cap(s), s)
	}
	first := &s[0]
	s = append(s, 4, 5, 6, 7, 8)
	if &s[0] != first {
		t.Errorf("appending within the reservation moved the slice")
	}
	s = append(s, 9)
	if len(s) != 9 || s[8] != 9 || s[7] != 8 || s[0] != 1 {
		t.Errorf("appending past the reservation: %v", s)
	}
	runtime.KeepAlive(owner)

	// Enough blocks, 64 bytes apart, for the queue (8 bytes an entry,
	// the smallest) to pass reserveAfter twice over; the pages of the
	// address table (a KiB each) pass it far sooner.
	h := new(heapState)
	h.reset()
	h.thread(1)
	const step = 64
	n := 2 * reserveAfter / 8
	for i := range n {
		h.liveAddrs.fill(h.liveAddrs.place(uint64(i)*step), uint64(i)*step, h.allocate(0, uint64(i)*step, 2))
	}
	if !h.reserved || !h.liveAddrs.reserved || !h.threads[0].reserved {
		t.Errorf("after %d allocations: handles reserved %v, pages %v, queue %v", n,
			h.reserved, h.liveAddrs.reserved, h.threads[0].reserved)
	}
	for i := range n {
		if num := h.liveAddrs.take(uint64(i) * step); num == 0 || h.handles[num].addr != uint64(i)*step {
			t.Fatalf("address %#x: handle %d", uint64(i)*step, num)
		}
	}
}
