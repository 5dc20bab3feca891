package trace_test

import (
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
)

// TestFormatDocExample checks that the worked example in docs/format.md is
// what the Writer writes, so that the document cannot drift from the code.
func TestFormatDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/format.md")
	if err != nil {
		t.Fatalf("reading the format document: %v", err)
	}
	want := docExampleBytes(t, string(doc))

	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Info{StartUnixNano: 1700000000000000000, TimeUnit: 100,
		Hostname: "h", Recorder: "mt", MaxFrames: 64, Command: []string{"./a"}})
	if err != nil {
		t.Fatal(err)
	}
	w.Uncompressed = true
	event := func(e trace.Event) func() error {
		e.Process, e.Thread = 1, 1
		return func() error { return w.Event(e) }
	}
	node := func(id, parent, module, offset uint64) func() error {
		return func() error {
			return w.StackNode(trace.StackNode{Process: 1, ID: id, Parent: parent, Module: module, Offset: offset})
		}
	}
	symbol := func(offset, line uint64) func() error {
		return func() error {
			return w.Symbol(trace.Symbol{Object: 1, Offset: offset, Frames: []trace.Frame{{Function: 1, File: 2, Line: line}}})
		}
	}
	for _, write := range []func() error{
		func() error {
			return w.ProcessStart(trace.Process{ID: 1, PID: 4242, PPID: 1, Exe: "/a", Args: []string{"a"}, Cwd: "/"})
		},
		func() error { return w.Object(trace.Object{ID: 1, Path: "/a"}) },
		func() error { return w.Module(trace.Module{Process: 1, ID: 1, Object: 1, Base: 0x400000}) },
		func() error { return w.Thread(trace.Thread{Process: 1, Index: 1, TID: 4242}) },
		node(1, 0, 1, 0x1149),
		node(2, 1, 1, 0x1188),
		node(3, 2, 1, 0x11a0),
		node(4, 2, 1, 0x11c4),
		event(trace.Event{Kind: trace.KindAlloc, Time: 1000, API: trace.APIMalloc, Addr: 0x5010, Size: 24, Stack: 3, StackInUse: 496}),
		event(trace.Event{Kind: trace.KindAlloc, Time: 1000, API: trace.APIMalloc, Addr: 0x5030, Size: 300, Stack: 4, StackInUse: 560}),
		event(trace.Event{Kind: trace.KindFree, Time: 1250, API: trace.APIFree, Addr: 0x5010, Stack: 2, StackInUse: 432}),
		event(trace.Event{Kind: trace.KindAlloc, Time: 1290, API: trace.APIMalloc, Addr: 0x5010, Size: 16, Stack: 3, StackInUse: 496}),
		event(trace.Event{Kind: trace.KindRealloc, Time: 1350, API: trace.APIRealloc, OldAddr: 0x5030, Addr: 0x5030, Size: 400, Stack: 4, StackInUse: 560}),
		event(trace.Event{Kind: trace.KindFree, Time: 1400, API: trace.APIFree, Addr: 0x7ff0, Stack: 2, StackInUse: 440}),
		func() error { return w.String(trace.String{ID: 1, Value: "f"}) },
		func() error { return w.String(trace.String{ID: 2, Value: "a.c"}) },
		symbol(0x1188, 12),
		symbol(0x11a0, 14),
		w.Close,
	} {
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("the example in docs/format.md is out of date; the Writer writes:\n%s", hex.Dump(buf.Bytes()))
	}
}

// TestFormatDocTypeExample checks the bytes of the Type record that
// docs/format.md gives as an example: the first column of the table after
// "The Type record of the type `widget`".
func TestFormatDocTypeExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/format.md")
	if err != nil {
		t.Fatalf("reading the format document: %v", err)
	}
	_, example, ok := strings.Cut(string(doc), "The Type record of the type `widget`")
	example, _, _ = strings.Cut(example, "\n\n###")
	var want []byte
	for _, line := range strings.Split(example, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		b, err := hex.DecodeString(strings.ReplaceAll(strings.Trim(strings.TrimSpace(cells[1]), "`"), " ", ""))
		if err != nil {
			t.Fatalf("bad bytes in %q: %v", line, err)
		}
		want = append(want, b...)
	}
	if !ok || len(want) == 0 {
		t.Fatal("docs/format.md has no example of a Type record")
	}

	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Info{TimeUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	w.Uncompressed = true
	if err := w.Type(trace.Type{Object: 1, Size: 204, Name: "widget"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	records := blockStreams(t, buf.Bytes(), blockOffsets(t, buf.Bytes())[0]).stored[0]
	if !bytes.HasSuffix(records, want) {
		t.Errorf("the Type record in docs/format.md is % x; the Writer writes the records % x", want, records)
	}
}

// docExampleBytes returns the bytes of the hex dump in the Example section.
func docExampleBytes(t *testing.T, doc string) []byte {
	_, example, ok := strings.Cut(doc, "\n## Example\n")
	if !ok {
		t.Fatal("docs/format.md has no Example section")
	}
	_, dump, ok := strings.Cut(example, "```\n")
	dump, _, ok2 := strings.Cut(dump, "```")
	if !ok || !ok2 {
		t.Fatal("the Example section has no hex dump")
	}
	var data []byte
	for _, line := range strings.Split(strings.TrimSpace(dump), "\n") {
		// Offset, then up to 16 bytes in two groups, then |text|.
		fields := strings.Fields(strings.Split(line, "|")[0])
		b, err := hex.DecodeString(strings.Join(fields[1:], ""))
		if err != nil {
			t.Fatalf("bad hex dump line %q: %v", line, err)
		}
		data = append(data, b...)
	}
	return data
}
