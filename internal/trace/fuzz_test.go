package trace_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
)

var updateSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite the seed corpus in testdata/fuzz/FuzzReader")

// FuzzReader feeds the Reader arbitrary bytes: it must not panic, must come
// to an end, and must not allocate memory the input does not justify.
// Run it with: go test -run '^$' -fuzz FuzzReader -fuzztime 30s ./internal/trace
func FuzzReader(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		readToEnd(t, data)
		runtime.ReadMemStats(&after)
		// Lengths and counts in damaged data must not turn into big
		// allocations; a few buffers of the sizes the data backs are fine.
		if grown, limit := after.TotalAlloc-before.TotalAlloc, uint64(8<<20+100*len(data)); grown > limit {
			t.Errorf("reading %d bytes allocated %d bytes, more than %d", len(data), grown, limit)
		}
	})
}

// FuzzBlockStreams fuzzes the decoding of records and events: random
// changes to a whole file nearly always break a block's CRC or its stream
// table, so FuzzReader rarely gets past the block checks. Here the input is
// a block's streams, wrapped in a block with a stream table and a CRC that
// fit.
// Run it with: go test -run '^$' -fuzz FuzzBlockStreams -fuzztime 30s ./internal/trace
func FuzzBlockStreams(f *testing.F) {
	for _, seed := range fuzzSeeds(f)[:3] {
		for _, off := range blockOffsets(f, seed) {
			s := blockStreams(f, seed, off)
			if len(s.compressed) > 0 {
				continue
			}
			var s12 [12][]byte
			copy(s12[:], s.stored)
			f.Add(s12[0], s12[1], s12[2], s12[3], s12[4], s12[5], s12[6], s12[7],
				s12[8], s12[9], s12[10], s12[11])
		}
	}
	f.Fuzz(func(t *testing.T, records, ops, size, addr, ref, stack, raw,
		sizeTails, addrTails, refTails, stackTails, rawTails []byte) {
		readToEnd(t, wrapStreams(records, ops, size, addr, ref, stack, raw,
			sizeTails, addrTails, refTails, stackTails, rawTails))
	})
}

// wrapStreams returns a trace file of one block holding streams, stored raw.
func wrapStreams(streams ...[]byte) []byte {
	payload := binary.AppendUvarint(nil, uint64(len(streams)))
	raw := 0
	for _, s := range streams {
		payload = binary.AppendUvarint(payload, uint64(len(s)))
		payload = binary.AppendUvarint(payload, uint64(len(s)))
		payload = append(payload, 0)
		payload = append(payload, s...)
		raw += len(s)
	}
	data := []byte("memtrail\x01\x00\x00\x00\x00\x00\x00\x00MTBK\x01\x00\x00\x00")
	data = binary.LittleEndian.AppendUint32(data, uint32(len(payload)))
	data = binary.LittleEndian.AppendUint32(data, uint32(raw))
	data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(payload, crc32.MakeTable(crc32.Castagnoli)))
	return append(data, payload...)
}

func readToEnd(t *testing.T, data []byte) {
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		var v *trace.VersionError
		if !errors.Is(err, trace.ErrNotTrace) && !errors.As(err, &v) {
			t.Fatalf("NewReader: unexpected error %v", err)
		}
		return
	}
	for range 1 << 24 {
		_, err := r.Next()
		var d *trace.DamageError
		switch {
		case err == nil, errors.As(err, &d), errors.Is(err, trace.ErrIncomplete):
		case err == io.EOF:
			return
		default:
			t.Fatalf("Next: unexpected error %v", err)
		}
	}
	t.Fatal("reader does not come to an end")
}

// fuzzSeeds returns a few valid and damaged traces.
func fuzzSeeds(t testing.TB) [][]byte {
	plain, _ := smallTrace(t, false)
	compressed, _ := smallTrace(t, true)
	kinds := encode(t, allKinds, 64, false)
	events := writeEvents(t, manyEvents(150), 512, true)
	flipped := bytes.Clone(compressed)
	flipped[len(flipped)/2] ^= 0x10
	offsets := blockOffsets(t, plain)
	garbage := append(append(bytes.Clone(plain[:offsets[1]]), "MTBKjunk"...), plain[offsets[1]:]...)
	return [][]byte{
		plain,
		events,
		kinds,
		compressed,
		compressed[:len(compressed)-7],
		flipped,
		garbage,
		plain[:fileHeaderSize],
	}
}

// TestFuzzSeeds checks the seeds read as expected, and rewrites the checked
// in corpus with -update-fuzz-seeds.
func TestFuzzSeeds(t *testing.T) {
	seeds := fuzzSeeds(t)
	for _, seed := range seeds {
		readToEnd(t, seed)
	}
	if !*updateSeeds {
		return
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzReader")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	names := []string{"plain", "events", "all-kinds", "compressed", "truncated", "flipped-byte", "garbage-between-blocks", "header-only"}
	for i, seed := range seeds {
		text := fmt.Sprintf("go test fuzz v1\n[]byte(%+q)\n", seed)
		if err := os.WriteFile(filepath.Join(dir, names[i]), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
