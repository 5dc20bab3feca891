package trace

import "testing"

// TestAllocateRoom checks that allocateRoom counts exactly the
// allocations roomToAllocate lets allocate make without making room, from
// states that blocks released in any order, compactions and grown queues
// and tables leave.
func TestAllocateRoom(t *testing.T) {
	seed := uint64(3)
	rnd := func(n uint64) uint64 {
		seed = seed*6364136223846793005 + 1442695040888963407
		return (seed >> 33) % n
	}
	h := new(heapState)
	h.reset()
	ti := h.thread(1)
	var live []uint32
	addr := uint64(0x1000)
	for round := range 3000 {
		// Allocate and release at random, then check.
		for range rnd(40) {
			if len(live) > 0 && rnd(2) == 0 || len(live) > 4096 {
				at := rnd(uint64(len(live)))
				h.release(ti, live[at])
				live = append(live[:at], live[at+1:]...)
				continue
			}
			addr += 32
			live = append(live, h.allocate(ti, addr, 2))
		}
		th := &h.threads[ti]
		room := h.allocateRoom(th)
		fill := room
		if room > 4096 {
			// Tables in reservations have room for a whole block of
			// the trace: a few of it are taken.
			fill = int(rnd(64))
		}
		for k := range fill {
			if !h.roomToAllocate(th) {
				t.Fatalf("round %d: no room for allocation %d of the %d counted", round, k, room)
			}
			addr += 32
			live = append(live, h.allocate(ti, addr, 2))
		}
		if fill == room && h.roomToAllocate(th) {
			t.Fatalf("round %d: room for more than the %d allocations counted", round, room)
		}
		if left := h.allocateRoom(th); fill < room && left != room-fill {
			t.Fatalf("round %d: room for %d allocations after %d of %d", round, left, fill, room)
		}
	}
}
