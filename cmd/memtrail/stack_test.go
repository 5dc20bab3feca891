package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestStackBadInput gives memtrail stack what it cannot analyze: each
// must be one clear line and status 1 (2 for the command line).
func TestStackBadInput(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("not a program\n"), 0o644)
	elf32 := filepath.Join(dir, "prog32")
	os.WriteFile(elf32, elfHeader(1, 3), 0o755) // ELFCLASS32, EM_386
	arm := filepath.Join(dir, "prog-arm64")
	os.WriteFile(arm, elfHeader(2, 183), 0o755) // ELFCLASS64, EM_AARCH64
	prog := fixture.Build(t, filepath.Join("..", "..", "internal", "stackdepth", "testdata", "chain.c"))
	stripped := filepath.Join(dir, "stripped")
	if out, err := exec.Command("strip", "-o", stripped, prog).CombinedOutput(); err != nil {
		t.Fatalf("strip: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"stack", filepath.Join(dir, "none")}, 1, "no such file"},
		{[]string{"stack", text}, 1, "is not an ELF file"},
		{[]string{"stack", elf32}, 1, "32-bit EM_386 binary; only x86-64 is supported"},
		{[]string{"stack", arm}, 1, "64-bit EM_AARCH64 binary; only x86-64 is supported"},
		{[]string{"stack", stripped}, 1, "has no function symbols (stripped?)"},
		{[]string{"stack", "-entry", "nowhere", prog}, 1, `has no function "nowhere"`},
		{[]string{"stack"}, 2, "needs a binary"},
		{[]string{"stack", "-su", filepath.Join(dir, "none.su"), prog}, 1, "none.su"},
	} {
		t.Run(strings.Join(c.args[1:], " "), func(t *testing.T) { checkBadInput(t, c.args, c.code, c.want) })
	}
}

// elfHeader returns the header of an ELF file of class and machine with
// no sections: enough for debug/elf to say what it is.
func elfHeader(class byte, machine uint16) []byte {
	h := []byte{0x7f, 'E', 'L', 'F', class, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	h = binary.LittleEndian.AppendUint16(h, 2) // ET_EXEC
	h = binary.LittleEndian.AppendUint16(h, machine)
	h = binary.LittleEndian.AppendUint32(h, 1) // version
	if class == 1 {
		h = append(h, make([]byte, 12)...) // entry, phoff, shoff
		h = binary.LittleEndian.AppendUint32(h, 0)
		h = binary.LittleEndian.AppendUint16(h, 52)
		return append(h, make([]byte, 10)...)
	}
	h = append(h, make([]byte, 24)...) // entry, phoff, shoff
	h = binary.LittleEndian.AppendUint32(h, 0)
	h = binary.LittleEndian.AppendUint16(h, 64)
	return append(h, make([]byte, 10)...)
}

// TestStack runs memtrail stack on the chain fixture, as text and JSON.
func TestStack(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("..", "..", "internal", "stackdepth", "testdata", "chain.c"))
	for _, args := range [][]string{{"stack", prog}, {"stack", "-json", prog}, {"stack", "-roots", "-top", "2", prog}, {"stack", "-entry", "a", prog}} {
		var stdout, stderr bytes.Buffer
		code, err := run(args, &stdout, &stderr)
		if code != 0 || err != nil {
			t.Fatalf("%q: status %d, %v", args, code, err)
		}
		if !strings.Contains(stdout.String(), "main") && args[1] != "-entry" {
			t.Errorf("%q: main is not in\n%s", args, stdout.String())
		}
	}
}

// TestStackAgainstTrace records the measured fixture and compares: the
// stack above main comes out the same from every heap event whose call
// stack runs through the program's own frames (main's and c's, 3.5 KiB
// deeper), and the high-water mark, which counts malloc's and the agent's
// frames below c, exceeds the bound, which says so.
func TestStackAgainstTrace(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("..", "..", "internal", "stackdepth", "testdata", "measured.c"))
	trace := filepath.Join(t.TempDir(), "measured.mtr")
	var stdout, stderr bytes.Buffer
	if code, err := run([]string{"run", "-q", "-o", trace, "--", prog}, &stdout, &stderr); code != 0 || err != nil {
		t.Fatalf("run: status %d, %v\n%s", code, err, stderr.String())
	}
	stdout.Reset()
	if code, err := run([]string{"stack", "-json", prog, trace}, &stdout, &stderr); code != 0 || err != nil {
		t.Fatalf("stack: status %d, %v", code, err)
	}
	var rep struct {
		Entries []struct {
			DepthBytes uint64 `json:"depth_bytes"`
		} `json:"entries"`
		Measured struct {
			Threads []struct {
				Measured   uint64 `json:"measured_bytes"`
				Root       string `json:"root"`
				Above      uint64 `json:"above_root_bytes"`
				AboveKnown bool   `json:"above_root_known"`
				Bound      uint64 `json:"bound_bytes"`
				Exceeded   bool   `json:"exceeded"`
			} `json:"threads"`
		} `json:"measured"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Measured.Threads) != 1 || len(rep.Entries) != 1 {
		t.Fatalf("report %s", stdout.String())
	}
	th := rep.Measured.Threads[0]
	if th.Root != "main" || !th.AboveKnown || th.Above == 0 || th.Bound != th.Above+rep.Entries[0].DepthBytes {
		t.Errorf("thread 1: %+v; want root main, the stack above it known, bound = above + main's %d", th, rep.Entries[0].DepthBytes)
	}
	if !th.Exceeded || th.Measured <= th.Bound {
		t.Errorf("thread 1: measured %d, bound %d: malloc's frames below c should exceed it", th.Measured, th.Bound)
	}
	t.Logf("measured %d bytes, bound %d = %d above main + %d", th.Measured, th.Bound, th.Above, rep.Entries[0].DepthBytes)
	stdout.Reset()
	run([]string{"stack", prog, trace}, &stdout, &stderr)
	if !strings.Contains(stdout.String(), "EXCEEDS the bound") {
		t.Errorf("the text does not say the bound was exceeded:\n%s", stdout.String())
	}
}
