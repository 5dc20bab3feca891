package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: memtrail writes to the terminal end,
// the test reads what it wrote from the other.
func openPTY(t *testing.T) (term, reader *os.File) {
	t.Helper()
	// Non-blocking, so that reads can have deadlines.
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("a terminal for the test: %v", err)
	}
	master := os.NewFile(uintptr(fd), "/dev/ptmx")
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	term, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Close() })
	return term, master
}

// readAll reads what was written to the terminal so far.
func readAll(t *testing.T, r *os.File) string {
	t.Helper()
	r.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b bytes.Buffer
	io.Copy(&b, r)
	return b.String()
}

// TestColors checks that check writes colors to a terminal, and not with
// NO_COLOR set, nor to a file.
func TestColors(t *testing.T) {
	small := writeTrace(t, t.TempDir(), "small.mtr", smallTrace)
	args := []string{"check", "-max-peak", "1", "-max-allocations", "9", small}
	term, reader := openPTY(t)
	if code, _ := run(args, term, io.Discard); code != 3 {
		t.Fatalf("check: status %d, want 3", code)
	}
	if out := readAll(t, reader); !strings.Contains(out, "\033[31mFAIL\033[0m") || !strings.Contains(out, "\033[32mok  \033[0m") {
		t.Errorf("check on a terminal: no red FAIL and green ok in %q", out)
	}
	t.Setenv("NO_COLOR", "1")
	run(args, term, io.Discard)
	if out := readAll(t, reader); strings.Contains(out, "\033[") || !strings.Contains(out, "FAIL") {
		t.Errorf("check on a terminal with NO_COLOR: %q", out)
	}
	t.Setenv("NO_COLOR", "")
	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	run(args, file, io.Discard)
	if data, _ := os.ReadFile(file.Name()); strings.Contains(string(data), "\033[") {
		t.Errorf("check into a file: colors in %q", data)
	}
}

// TestProgressBar draws the progress of a long read on a terminal: nothing
// in the first half second, then the bar, then a cleared line; and no bar
// when stderr is not a terminal.
func TestProgressBar(t *testing.T) {
	if progressBar(&bytes.Buffer{}, "x.mtr") != nil {
		t.Error("a progress bar for a buffer, which is no terminal")
	}
	term, reader := openPTY(t)
	bar := progressBar(term, "/tmp/big.mtr")
	bar(0, 4<<20)
	bar(1<<20, 4<<20)
	if out := readAll(t, reader); out != "" {
		t.Errorf("a bar within half a second: %q", out)
	}
	time.Sleep(600 * time.Millisecond)
	bar(2<<20, 4<<20)
	if out := readAll(t, reader); !strings.Contains(out, "reading big.mtr [============             ]  50% of 4.00 MiB") {
		t.Errorf("the bar at half: %q", out)
	}
	bar(4<<20, 4<<20)
	if out := readAll(t, reader); out != "\r\033[K" {
		t.Errorf("the end of the bar: %q, want the line cleared", out)
	}
}
