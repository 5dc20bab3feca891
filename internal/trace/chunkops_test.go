package trace

import (
	"math/rand"
	"testing"
)

// TestChunkOps checks chunkOps, which counts and checks the op bytes
// eight at a time, against the op bytes one by one: chunks of every
// length around eight, with every op byte, valid or not, at every place.
func TestChunkOps(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	valid := func() byte { return byte(1+r.Intn(3))<<opShift | byte(r.Intn(apiMask+1)) }
	for n := range 20 {
		ops := make([]byte, n)
		for i := range ops {
			ops[i] = valid()
		}
		for at := -1; at < n; at++ {
			for b := range 256 {
				if at < 0 && b > 0 {
					break
				}
				p := append([]byte(nil), ops...)
				if at >= 0 {
					p[at] = byte(b)
				}
				var refs, addrs int
				ok := true
				for _, op := range p {
					switch op >> opShift {
					case opAlloc:
						addrs++
					case opFree:
						refs++
					case opRealloc:
						refs++
						addrs++
					default:
						ok = false
					}
				}
				var d blockDecoder
				d.cols.c[streamOps].p = p
				d.block, d.process, d.thread, d.eventTime = 7, 8, 9, 10
				events := make([]Event, n)
				gotRefs, gotAddrs, gotOK := d.chunkOps(events)
				if gotOK != ok || ok && (gotRefs != refs || gotAddrs != addrs) {
					t.Fatalf("%d op bytes, 0x%02x at %d: %d refs, %d addrs, %v; want %d, %d, %v",
						n, b, at, gotRefs, gotAddrs, gotOK, refs, addrs, ok)
				}
				if !ok {
					continue
				}
				if d.cols.c[streamOps].i != n {
					t.Fatalf("%d op bytes, 0x%02x at %d: the ops stream moved on %d", n, b, at, d.cols.c[streamOps].i)
				}
				for i, e := range events {
					want := Event{Kind: KindContext + Kind(p[i]>>opShift), API: API(p[i] & apiMask), Block: 7, Process: 8, Thread: 9, Time: 10}
					if e != want {
						t.Fatalf("%d op bytes, 0x%02x at %d: event %d is %+v, want %+v", n, b, at, i, e, want)
					}
				}
			}
		}
	}
}
