package tracetext_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
	"github.com/memtrail/memtrail/internal/trace/tracetext"
)

func testdataTraces(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no traces in testdata: %v", err)
	}
	traces := map[string]string{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		traces[filepath.Base(file)] = string(data)
	}
	return traces
}

func parse(t *testing.T, text string) []trace.Record {
	t.Helper()
	recs, err := tracetext.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestFormatStable checks that formatting is a canonical form: formatting
// what was parsed from it gives it again.
func TestFormatStable(t *testing.T) {
	for name, text := range testdataTraces(t) {
		once := tracetext.Format(parse(t, text))
		if twice := tracetext.Format(parse(t, once)); twice != once {
			t.Errorf("%s: format is not stable:\n%s\nthen\n%s", name, once, twice)
		}
	}
}

// TestBinaryRoundTrip checks that text written as a trace file reads back
// as the same text.
func TestBinaryRoundTrip(t *testing.T) {
	for name, text := range testdataTraces(t) {
		data, err := tracetext.Encode(text)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		recs, err := tracetext.Decode(data)
		if err != nil {
			t.Fatalf("%s: reading back: %v", name, err)
		}
		if got, want := tracetext.Format(recs), tracetext.Format(parse(t, text)); got != want {
			t.Errorf("%s: read back\n%s\nwant\n%s", name, got, want)
		}
	}
}

func TestEncodeWithoutInfoOrEnd(t *testing.T) {
	data, err := tracetext.Encode("alloc process=1 thread=1 time=3 api=malloc addr=0x10 size=1 stack=0\n")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := tracetext.Decode(data)
	if !errors.Is(err, trace.ErrIncomplete) {
		t.Errorf("reading a trace without end: %v, want ErrIncomplete", err)
	}
	want := "info time-unit=1\nalloc process=1 thread=1 time=3 api=malloc addr=0x10 size=1 stack=0\n"
	if got := tracetext.Format(recs); got != want {
		t.Errorf("read\n%s\nwant\n%s", got, want)
	}
}

// TestAlternativeSpellings checks the forms Parse accepts besides the
// canonical one.
func TestAlternativeSpellings(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`process-start id=1 pid=2 args="prog  a b"`, `process id=1 pid=2 args=[prog a b]`},
		{`stack-node process=1 id=2 parent=1 module=1 offset=4660`, `node process=1 id=2 parent=1 module=1 offset=0x1234`},
		{`alloc api="operator new[](align)" addr=16 size=0x10`, `alloc process=0 thread=0 time=0 api=new[]-aligned addr=0x10 size=16 stack=0`},
		{`free api=5 addr=0x10`, `free process=0 thread=0 time=0 api=free addr=0x10 stack=0`},
		{`process-end id=1 time=2 how=2 code=-0x10`, `process-end id=1 time=2 how=signaled code=-16`},
		{`object-status object=1 status=4`, `object-status object=1 status=stripped`},
		{`module process=1 id=1 object=1 base=0 segments=0:1:2:5;`, `module process=1 id=1 object=1 base=0x0 segments=0x0:0x1:0x2:r-x`},
		{"\t  thread   tid=3 index=2 process=1\t# comment", `thread process=1 index=2 tid=3`},
		{`info command=[] time-unit=1`, `info time-unit=1`},
	} {
		recs, err := tracetext.Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got := strings.TrimSuffix(tracetext.Format(recs), "\n"); got != tc.want {
			t.Errorf("Parse(%q) formats as\n%s\nwant\n%s", tc.in, got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, msg string }{
		{"allocate addr=1", `line 1: unknown record "allocate"`},
		{"\n\nfree size=3", `line 3: free has no field "size"`},
		{"alloc addr", `line 1: want key=value, got "addr"`},
		{"alloc =3", `line 1: want key=value, got "=3"`},
		{"alloc addr=1 addr=2", `line 1: field "addr" given twice`},
		{"alloc addr=zz", `line 1: field "addr": bad number "zz"`},
		{"alloc size=-1", `line 1: field "size": bad number "-1"`},
		{"alloc api=mallok", `line 1: field "api": unknown name "mallok"`},
		{`string id=1 value="abc`, `line 1: field "value": bad quoted string at "\"abc"`},
		{`info command=[a b`, `line 1: field "command": list without a closing ]`},
		{`string id=1 value=[a]`, `line 1: field "value": a list is not a value of this field`},
		{`symbol object=1 offset=1 frames=1:2`, `line 1: field "frames": bad frame "1:2": want function:file:line`},
		{`module segments=1:2:3:rwz`, `line 1: field "segments": bad segment "1:2:3:rwz": want vaddr:memsz:offset:flags`},
		{`object id=1 path=x build-id=xyz`, `line 1: field "build-id": bad hex bytes "xyz"`},
	} {
		_, err := tracetext.Parse(tc.in)
		if err == nil || err.Error() != tc.msg {
			t.Errorf("Parse(%q) = %v, want %q", tc.in, err, tc.msg)
		}
	}
}

func TestWriteRejectsInfo(t *testing.T) {
	w, err := trace.NewWriter(discard{}, trace.Info{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tracetext.Write(w, parse(t, "info time-unit=1")); err == nil {
		t.Error("Write wrote an info record")
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
