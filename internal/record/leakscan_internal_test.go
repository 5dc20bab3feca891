package record

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestParseScan reads a SCAN record with two stopped threads and two of
// the agent's mappings, and takes those out of a root range: before,
// between, after, overlapping its ends, and one that covers it all.
func TestParseScan(t *testing.T) {
	w := []uint64{0, 9, 100, 0x7000, 2, 0x9000, 0xa000, 2, 0x5000, 0x1000, 0x2000, 0x1000}
	sr := parseScan(w)
	if !slices.Equal(sr.sps, []uint64{0x7000, 0x9000, 0xa000}) || !slices.Equal(sr.own, [][2]uint64{{0x2000, 0x3000}, {0x5000, 0x6000}}) {
		t.Fatalf("parseScan: stack pointers %x, own mappings %x", sr.sps, sr.own)
	}
	for _, c := range []struct {
		lo, hi uint64
		want   [][2]uint64
	}{
		{0x1000, 0x8000, [][2]uint64{{0x1000, 0x2000}, {0x3000, 0x5000}, {0x6000, 0x8000}}},
		{0x2800, 0x5800, [][2]uint64{{0x3000, 0x5000}}},
		{0x2000, 0x3000, nil},
		{0x7000, 0x8000, [][2]uint64{{0x7000, 0x8000}}},
	} {
		if got := appendOutside(nil, c.lo, c.hi, sr.own); !slices.Equal(got, c.want) {
			t.Errorf("[%x, %x) outside the agent's mappings: %x, want %x", c.lo, c.hi, got, c.want)
		}
	}
	if sr := parseScan([]uint64{0, 9, 100, 0x7000, 5, 1}); len(sr.sps) != 1 || sr.own != nil {
		t.Errorf("a damaged record: stack pointers %x, own mappings %x", sr.sps, sr.own)
	}
}

// TestEndedDuringScanOnItsWayOut kills testdata/bigexit.c, which holds
// 512 MiB, and reads its memory until it is a zombie: while the kernel
// takes its memory back, reads fail (ESRCH) before the process is a
// zombie, and endedDuringScan must already say it ended (so the leak scan
// says the process ended while it was scanned, not only that a read
// failed: chromium's browser kills its renderers so).
func TestEndedDuringScanOnItsWayOut(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("testdata", "bigexit.c"), "-O2")
	cmd := exec.Command(prog)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("bigexit did not start: %v", err)
	}
	addr, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(line), "0x"), 16, 64)
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("bigexit printed %q", line)
	}
	pid := cmd.Process.Pid
	buf := make([]byte, 8)
	read := func() error {
		_, err := unix.ProcessVMReadv(pid, []unix.Iovec{{Base: &buf[0], Len: 8}}, []unix.RemoteIovec{{Base: uintptr(addr), Len: 8}}, 0)
		return err
	}
	if err := read(); err != nil {
		cmd.Process.Kill()
		t.Fatalf("reading bigexit's memory before the kill: %v", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	failed, wrong := 0, 0
	for {
		fields, ok := statFields(pid)
		if !ok || zombie(fields) {
			break
		}
		if read() != nil {
			failed++
			if !endedDuringScan(pid) {
				wrong++
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d failed reads of a killed process on its way out: endedDuringScan said it had not ended", wrong, failed)
	}
	t.Logf("%d reads failed before the process was a zombie", failed)
}
