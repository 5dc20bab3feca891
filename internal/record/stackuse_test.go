package record_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
)

// Depths of testdata/stackuse.c.
const (
	mainDepth   = 40
	threadDepth = 25
	allocDepth  = 10
)

// stackSlack is how far a painted high-water mark may be from the sum of
// the frames: -fstack-usage counts each frame whole, alignment padding
// included, and the deepest byte written is the bottom of the deepest
// frame's buffer, which the ABI's 16-byte alignment may put up to 15
// bytes above the frame's bottom.
const stackSlack = 16

// TestStackInUse records testdata/stackuse.c, built with -fstack-usage,
// and checks the stack in use the trace and its analysis say against the
// frame sizes the compiler reports:
//
//   - the allocation made at a known depth of alloc_deep is sampled at
//     exactly main's base plus those frames;
//   - the deepest points of the main thread and of the other thread,
//     where nothing allocates, are caught by the high-water marks: the
//     base of each (the stack in use at its first allocation, which
//     counts the program's arguments, environment and the frames above
//     main, or the thread's control block and TLS) plus the frames of
//     the recursion.
func TestStackInUse(t *testing.T) {
	prog, frames := buildWithStackUsage(t, src("stackuse.c"))
	rec := recordArgs(t, "", prog)
	events, highWater := stackOfTrace(t, rec.res.Path)
	if len(events[1]) != 5 || len(events[2]) != 2 {
		t.Fatalf("events by thread: %v, want 5 of the main thread, 2 of the other", events)
	}
	mainBase, threadBase := events[1][0], events[2][0]
	wantSample := mainBase + (allocDepth+1)*frames["alloc_deep"]
	if got := events[1][2]; got != wantSample {
		t.Errorf("the allocation at depth %d used %d bytes of stack, want %d (base %d + %d frames of %d)",
			allocDepth, got, wantSample, mainBase, allocDepth+1, frames["alloc_deep"])
	}
	check := func(what string, got, base, depth uint64) {
		t.Helper()
		want := base + (depth+1)*frames["recurse"]
		if got+stackSlack < want || got > want+stackSlack {
			t.Errorf("%s: high-water mark %d bytes, want %d ± %d (base %d + %d frames of %d)",
				what, got, want, stackSlack, base, depth+1, frames["recurse"])
		} else {
			t.Logf("%s: high-water mark %d bytes, frames say %d (base %d + %d × %d)", what, got, want, base, depth+1, frames["recurse"])
		}
	}
	check("main thread", highWater[1], mainBase, mainDepth)
	check("other thread", highWater[2], threadBase, threadDepth)

	// The analysis: a thread's peak is its high-water mark, deeper than
	// its samples; the process's, of samples only, is the deepest.
	p := rec.model.Processes[0]
	if th := p.Threads[0]; th.StackPeakBytes != highWater[1] || th.StackSampledOnly {
		t.Errorf("main thread's stack peak %d (sampled only %v), want %d", th.StackPeakBytes, th.StackSampledOnly, highWater[1])
	}
	if th := p.Threads[1]; th.StackPeakBytes != highWater[2] || th.StackSampledOnly {
		t.Errorf("other thread's stack peak %d (sampled only %v), want %d", th.StackPeakBytes, th.StackSampledOnly, highWater[2])
	}
	// While the other thread runs, the main thread waits in
	// pthread_create's last allocation (its fifth event).
	both := events[1][4] + threadBase
	if got := p.Summary.StackPeakBytes; got != max(wantSample, both) {
		t.Errorf("summary stack peak %d, want %d: the deepest sample, or the two threads' together (%d)", got, max(wantSample, both), both)
	}

}

// buildWithStackUsage compiles a C program with -fstack-usage (and the
// flags given) and returns it and its functions' frame sizes.
func buildWithStackUsage(t *testing.T, source string, cflags ...string) (string, map[string]uint64) {
	t.Helper()
	dir := t.TempDir()
	obj, prog := filepath.Join(dir, "prog.o"), filepath.Join(dir, "prog")
	for _, args := range [][]string{
		append([]string{"-O1", "-g", "-fstack-usage", "-c", "-o", obj, source}, cflags...),
		{"-o", prog, obj, "-lpthread"},
	} {
		if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
			t.Fatalf("cc %v: %v\n%s", args, err, out)
		}
	}
	frames, err := parseStackUsage(filepath.Join(dir, "prog.su"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"recurse", "worker", "main"} {
		if frames[f] == 0 {
			t.Fatalf("no static frame size for %s in %v", f, frames)
		}
	}
	return prog, frames
}

// parseStackUsage reads a .su file of gcc: lines of file:line:column:function,
// a tab, the frame's size in bytes, a tab, and static, dynamic or
// dynamic,bounded. Only static frames are kept.
func parseStackUsage(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	frames := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 3 {
			continue
		}
		loc := strings.Split(fields[0], ":")
		size, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil || fields[2] != "static" {
			continue
		}
		frames[loc[len(loc)-1]] = size
	}
	return frames, sc.Err()
}

// stackOfTrace returns the stack in use of the events of each thread of
// the trace's first process, and the highest high-water mark of each.
func stackOfTrace(t *testing.T, path string) (map[uint64][]uint64, map[uint64]uint64) {
	t.Helper()
	events, highWater := map[uint64][]uint64{}, map[uint64]uint64{}
	for _, rec := range readTrace(t, path) {
		switch {
		case rec.Kind.IsEvent() && rec.Event.Process == 1:
			events[rec.Event.Thread] = append(events[rec.Event.Thread], rec.Event.StackInUse)
		case rec.Kind == trace.KindThreadStack && rec.ThreadStack.Process == 1:
			highWater[rec.ThreadStack.Index] = max(highWater[rec.ThreadStack.Index], rec.ThreadStack.HighWater)
		}
	}
	return events, highWater
}
