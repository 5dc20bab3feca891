package analysis_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
	"github.com/memtrail/memtrail/internal/trace/tracetext"
)

// Damage to a trace loses the records in the damaged part, and nothing
// else: the model of a damaged trace must be that of a sound trace holding
// the records that could still be read, plus a warning. These tests damage
// every block of a trace of many small blocks in turn, and cut it short at
// many places.

const (
	fileHeaderSize  = 16
	blockHeaderSize = 20
)

// smallBlocks writes the trace in text form as a trace file of many small,
// uncompressed blocks, and returns the file and where its blocks start.
func smallBlocks(t *testing.T, text string) ([]byte, []int) {
	t.Helper()
	recs, err := tracetext.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, *recs[0].Info)
	if err != nil {
		t.Fatal(err)
	}
	w.BlockSize, w.Uncompressed = 40, true
	if err := tracetext.Write(w, recs[1:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	var offsets []int
	for off := fileHeaderSize; off < len(data); {
		offsets = append(offsets, off)
		off += blockHeaderSize + int(binary.LittleEndian.Uint32(data[off+8:]))
	}
	return data, offsets
}

// readable returns the records of a trace file a Reader can read, going on
// after damage, as a sound trace file.
func readable(t *testing.T, data []byte) []byte {
	t.Helper()
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var recs []trace.Record
	info := trace.Info{TimeUnit: 1}
	for {
		rec, err := r.Next()
		var damage *trace.DamageError
		switch {
		case err == nil && rec.Kind == trace.KindInfo:
			info = *rec.Info
		case err == nil:
			recs = append(recs, rec)
		case errors.As(err, &damage), errors.Is(err, trace.ErrIncomplete):
		case errors.Is(err, io.EOF):
			var buf bytes.Buffer
			w, err := trace.NewWriter(&buf, info)
			if err != nil {
				t.Fatal(err)
			}
			if err := tracetext.Write(w, recs); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		default:
			t.Fatal(err)
		}
	}
}

// checkDamaged checks that the model of data is that of what can be read
// of it, with one warning more, which starts with warning.
func checkDamaged(t *testing.T, data []byte, warning string) {
	t.Helper()
	got := facts(analyzeBytes(t, data))
	want := facts(analyzeBytes(t, readable(t, data)))
	var warnings int
	var kept []string
	for _, line := range strings.SplitAfter(got, "\n") {
		if strings.HasPrefix(line, "warning "+warning) {
			warnings++
			continue
		}
		kept = append(kept, line)
	}
	if warnings != 1 {
		t.Errorf("%d warnings starting with %q, want 1:\n%s", warnings, warning, got)
	}
	// The sound trace of the readable records has no end record if the
	// damage took it; the damaged trace is warned about only once.
	var wantKept []string
	for _, line := range strings.SplitAfter(want, "\n") {
		if !strings.HasPrefix(line, "warning trace has no end record") {
			wantKept = append(wantKept, line)
		}
	}
	want = strings.Join(wantKept, "")
	if got := strings.Join(kept, ""); got != want {
		t.Errorf("model differs from that of the readable records (-want +got):\n%s", lineDiff(want, got))
	}
}

func widgetText(t *testing.T) string {
	t.Helper()
	text, err := os.ReadFile("testdata/widget.txt")
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

func TestDamagedBlocks(t *testing.T) {
	data, offsets := smallBlocks(t, widgetText(t))
	if len(offsets) < 10 {
		t.Fatalf("only %d blocks: make them smaller", len(offsets))
	}
	for i, off := range offsets[1:] {
		damaged := bytes.Clone(data)
		damaged[off+blockHeaderSize] ^= 0xff // the checksum no longer matches
		t.Logf("block %d at %d", i+1, off)
		checkDamaged(t, damaged, "trace damaged at byte")
	}
}

func TestTruncated(t *testing.T) {
	data, offsets := smallBlocks(t, widgetText(t))
	for _, off := range offsets[1:] {
		// Inside a block, or right after one: then the trace is sound
		// as far as it goes, but has no end.
		checkDamaged(t, data[:off+blockHeaderSize+3], "trace truncated at byte")
		checkDamaged(t, data[:off], "trace has no end record")
	}
}
