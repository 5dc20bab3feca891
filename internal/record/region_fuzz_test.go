package record

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRegion drains a region whose first ring, node table and sequence
// counter hold whatever the fuzzer makes: what a program that scribbles
// over its buffer can leave there. The recorder must neither panic nor
// loop, and must not drop what was published silently: either every
// record is handled, or the region is found damaged. The seed corpus
// (testdata/fuzz/FuzzRegion) holds well-formed records of each kind.
func FuzzRegion(f *testing.F) {
	rec, err := newRecorder(Options{Output: filepath.Join(f.TempDir(), "fuzz.mtr"), Args: []string{"fuzz"}, Log: io.Discard,
		TimeUnit: DefaultTimeUnit, MaxFrames: 8, RingSize: 4096, Threads: 2})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { rec.srv.close(); rec.file.Close() })
	f.Fuzz(func(t *testing.T, ring, nodes []byte, issued uint64) {
		r, err := newRegion(regionConfig{slots: 2, firstRing: 4096, ringSize: 4096, nodeCap: 64, maxFrames: 8}, os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		defer r.unmap()
		words := r.ring(0)
		n := min(len(ring)/8, len(words))
		for i := range n {
			words[i] = binary.LittleEndian.Uint64(ring[i*8:])
		}
		*r.u32(r.slotOff(0) + slotState) = slotOwned
		*r.u64(r.slotOff(0) + slotWrite) = uint64(n * 8)
		nodes = nodes[:min(len(nodes), int(r.nodeCap*nodeBytes))]
		copy(r.mem[r.nodesOffset:], nodes)
		*r.u64(hdrNodeCount) = uint64(len(nodes) / nodeBytes)
		*r.u64(hdrSeq) = issued

		rec.symbols = newSymbolTable() // a module record opens its path
		defer rec.symbols.close()
		p := newProcess(1, os.Getpid(), r)
		p.drain(rec, false)
		p.drain(rec, true)
		s := &p.slots[0]
		if p.damaged == "" && (s.head != nil || s.pos != uint64(n*8) || s.pending() != 0) {
			t.Errorf("the region was not found damaged, but the recorder handled %d bytes of the %d published", s.pos, n*8)
		}
	})
}
