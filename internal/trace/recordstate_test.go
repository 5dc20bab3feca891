package trace

import (
	"bytes"
	"io"
	"math"
	"reflect"
	"testing"
)

// codedRecords returns StackNode and Symbol records that take every path
// of their coding: chains, siblings, ids and modules that go down, parents
// above their children, processes interleaved, extreme values, symbols out
// of order.
func codedRecords() []Record {
	var recs []Record
	node := func(process, id, parent, module, offset uint64) {
		recs = append(recs, Record{Kind: KindStackNode, StackNode: &StackNode{Process: process, ID: id,
			Parent: parent, Module: module, Offset: offset}})
	}
	symbol := func(object, offset uint64, frames ...Frame) {
		recs = append(recs, Record{Kind: KindSymbol, Symbol: &Symbol{Object: object, Offset: offset, Frames: frames}})
	}
	node(1, 1, 0, 1, 0x1149)
	node(1, 2, 1, 1, 0x1188)
	node(1, 3, 2, 3, 0x9a0c1)
	node(1, 4, 2, 1, 0x11c4)
	node(2, 1, 0, 2, 0x1149)
	node(1, 5, 4, 1, 0)
	node(1, 3, 7, 0, math.MaxUint64)
	node(3, math.MaxUint64, math.MaxUint64-1, math.MaxUint64, 1<<63)
	node(3, 0, math.MaxUint64, 0, 0)
	node(math.MaxUint64, 1<<40, 1<<41, 7, 0x10)
	symbol(1, 0x1149, Frame{Function: 1, File: 2, Line: 10})
	symbol(1, 0x1188, Frame{Function: 3, File: 2, Line: 11}, Frame{Function: 1, File: 2, Line: 9})
	symbol(1, 0x1100)
	symbol(3, 0x9a0c1, Frame{Function: 4})
	symbol(2, 0, Frame{Function: math.MaxUint64, File: math.MaxUint64, Line: math.MaxUint64}, Frame{})
	symbol(math.MaxUint64, math.MaxUint64, Frame{Function: 1, Line: 1 << 62})
	symbol(0, 0)
	return recs
}

// writeAndRead writes recs with the given block size and reads them back.
func writeAndRead(t *testing.T, w *Writer, buf *bytes.Buffer, recs []Record) []Record {
	t.Helper()
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var got []Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind != KindInfo && rec.Kind != KindEnd {
			got = append(got, rec)
		}
	}
}

func TestCodedRecordsRoundTrip(t *testing.T) {
	recs := codedRecords()
	for _, blockSize := range []int{1, 40, 0} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, Info{})
		if err != nil {
			t.Fatal(err)
		}
		w.BlockSize, w.Uncompressed = blockSize, true
		got := writeAndRead(t, w, &buf, recs)
		if !reflect.DeepEqual(got, recs) {
			t.Errorf("block size %d: read back\n%v\nwant\n%v", blockSize, got, recs)
		}
	}
}

// TestCodedRecordStartsNewBlock writes a Symbol too big for what is left
// of its block: it goes to the next block, coded against that block's
// fresh state rather than against the symbol before it. A Symbol too big
// for any block is refused and leaves the state as it was. The blocks are
// made small for the test: the Writer cuts blocks at 1 MiB, and only a
// record of more than 32 MiB does not fit in what is left of one.
func TestCodedRecordStartsNewBlock(t *testing.T) {
	frames := func(n int) []Frame {
		f := make([]Frame, n)
		for i := range f {
			f[i] = Frame{Function: uint64(i%3 + 1)}
		}
		return f
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Info{})
	if err != nil {
		t.Fatal(err)
	}
	w.maxRaw, w.BlockSize, w.Uncompressed = 1024, 400, true
	first := []Record{
		{Kind: KindStackNode, StackNode: &StackNode{Process: 1, ID: 1, Module: 1, Offset: 0x1149}},
		{Kind: KindSymbol, Symbol: &Symbol{Object: 1, Offset: 0x1149, Frames: frames(2)}},
		{Kind: KindString, String: &String{ID: 1, Value: string(bytes.Repeat([]byte("x"), 200))}},
	}
	for _, r := range first {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	tooBig := Symbol{Object: 1, Offset: 0x1200, Frames: frames(400)}
	if err := w.Symbol(tooBig); err == nil {
		t.Fatal("a symbol too big for a block was written")
	}
	next := []Record{
		{Kind: KindSymbol, Symbol: &Symbol{Object: 1, Offset: 0x1188, Frames: frames(250)}},
		{Kind: KindStackNode, StackNode: &StackNode{Process: 1, ID: 2, Parent: 1, Module: 1, Offset: 0x1188}},
	}
	got := writeAndRead(t, w, &buf, next)
	if want := append(first, next...); !reflect.DeepEqual(got, want) {
		t.Errorf("read back\n%v\nwant\n%v", got, want)
	}
	// The big symbol fills the second block on its own.
	if blocks := len(fileOffsets(buf.Bytes())); blocks != 3 {
		t.Errorf("wrote %d blocks, want 3", blocks)
	}
}
