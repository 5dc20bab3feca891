package record_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/record"
	"github.com/memtrail/memtrail/internal/trace"
)

// randomProgram writes a C program whose calls are drawn from seed: a dozen
// functions with frames of random sizes, some with alloca, calling each
// other and recursing to random depths up to recursion frames (beyond the
// depth limit), and allocating, freeing and reallocating along the way, all
// decided by a generator seeded at run time too. It is deterministic: two
// runs make the same calls and allocations.
func randomProgram(seed uint64, recursion int) string {
	rng := rand.New(rand.NewPCG(seed, 1))
	const funcs = 12
	var b strings.Builder
	fmt.Fprintf(&b, `#include <alloca.h>
#include <stdlib.h>

static unsigned long long state = %dULL;
static unsigned next(void)
{
	state = state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned)(state >> 33);
}
static void *slots[64];
static long budget = 30000;

__attribute__((noinline)) static void act(void)
{
	unsigned i = next() %% 64;
	switch (next() %% 4) {
	case 0: case 1: free(slots[i]); slots[i] = malloc(next() %% 200 + 1); break;
	case 2: free(slots[i]); slots[i] = 0; break;
	default: slots[i] = realloc(slots[i], next() %% 300 + 1); break;
	}
	budget--;
}
`, seed)
	for i := range funcs {
		fmt.Fprintf(&b, "static void f%d(int d);\n", i)
	}
	for i := range funcs {
		fmt.Fprintf(&b, "__attribute__((noinline)) static void f%d(int d)\n{\n", i)
		fmt.Fprintf(&b, "\tvolatile char pad[%d];\n\tpad[0] = (char)d;\n", 1+rng.IntN(200))
		if rng.IntN(3) == 0 {
			b.WriteString("\tvolatile char *dyn = alloca(next() % 96 + 1);\n\tdyn[0] = 1;\n")
		}
		// A recursion whose depth is drawn at each call. d < 0 is how
		// many calls it has still to go.
		if rng.IntN(3) == 0 {
			fmt.Fprintf(&b, "\tif (d >= 0 && next() %% 3 == 0)\n\t\tf%d(-(int)(next() %% %d) - 1);\n", i, recursion)
			fmt.Fprintf(&b, "\tif (d < 0) {\n\t\tif (d < -1)\n\t\t\tf%d(d + 1);\n\t\telse\n\t\t\tact();\n\t\tpad[0]++;\n\t\treturn;\n\t}\n", i)
		}
		fmt.Fprintf(&b, "\tint n = (int)(next() %% %d);\n", 2+rng.IntN(4))
		b.WriteString("\tfor (int k = 0; k < n && budget > 0; k++) {\n\t\tswitch (next() % 4) {\n\t\tcase 0: act(); break;\n")
		for c := 1; c < 4; c++ {
			fmt.Fprintf(&b, "\t\tcase %d: if (d < 40) f%d(d + 1); break;\n", c, rng.IntN(funcs))
		}
		b.WriteString("\t\t}\n\t}\n\tpad[0]++;\n}\n")
	}
	b.WriteString("int main(void)\n{\n\twhile (budget > 0)\n\t\tf0(0);\n\treturn 0;\n}\n")
	return b.String()
}

// eventStacks reads the trace at path and returns the call stack of each
// of its events, in order, each frame as its object and offset (or the
// number of frames a cut stack left out).
func eventStacks(t *testing.T, path string) []string {
	t.Helper()
	objects := map[uint64]string{}
	modules := map[[2]uint64]uint64{}
	nodes := map[[2]uint64]trace.StackNode{}
	type ref struct{ process, stack uint64 }
	var events []ref
	for _, rec := range readTrace(t, path) {
		switch rec.Kind {
		case trace.KindObject:
			objects[rec.Object.ID] = rec.Object.Path
		case trace.KindModule:
			modules[[2]uint64{rec.Module.Process, rec.Module.ID}] = rec.Module.Object
		case trace.KindStackNode:
			nodes[[2]uint64{rec.StackNode.Process, rec.StackNode.ID}] = *rec.StackNode
		case trace.KindAlloc, trace.KindFree, trace.KindRealloc:
			events = append(events, ref{rec.Event.Process, rec.Event.Stack})
		}
	}
	out := make([]string, len(events))
	for i, e := range events {
		var frames []string
		for id := e.stack; id != 0; {
			n, ok := nodes[[2]uint64{e.process, id}]
			if !ok {
				t.Fatalf("event %d: stack node %d missing", i, id)
			}
			if n.Module == trace.ModuleCut {
				frames = append(frames, fmt.Sprintf("[%d not recorded]", n.Offset))
			} else {
				obj := objects[modules[[2]uint64{e.process, n.Module}]]
				frames = append(frames, fmt.Sprintf("%s+%#x", filepath.Base(obj), n.Offset))
			}
			id = n.Parent
		}
		out[i] = strings.Join(frames, " ")
	}
	return out
}

// recordBothWays records prog with the depth limit, once reusing the outer
// part of each thread's previous stack and once unwinding every stack
// whole, and returns the stacks of their events (eventStacks).
func recordBothWays(t *testing.T, prog string, limit int, name string) (reused, whole []string) {
	t.Helper()
	var stacks [2][]string
	for i, full := range []bool{false, true} {
		out := fmt.Sprintf("%s-%v.mtr", name, full)
		res, err := record.Run(record.Options{Args: []string{prog}, Output: out, AgentPath: fixture.Agent(t),
			MaxFrames: limit, FullUnwind: full})
		if err != nil {
			t.Fatal(err)
		}
		if res.Lost != 0 || res.Program.ExitCode() != 0 {
			t.Fatalf("%s: %d events lost, exit status %d", filepath.Base(name), res.Lost, res.Program.ExitCode())
		}
		stacks[i] = eventStacks(t, out)
	}
	reused, whole = stacks[0], stacks[1]
	if len(reused) != len(whole) || len(reused) < 10000 {
		t.Fatalf("%s: %d and %d events", filepath.Base(name), len(reused), len(whole))
	}
	return reused, whole
}

// TestStackReuse checks the unwinder's reuse of the outer part of a
// thread's previous stack against unwinding every stack whole: random
// programs, built with and without optimization, recorded both ways with
// the default depth limit (their deepest recursions are cut) and with the
// highest, give every event the same call stack. (It found reuses that
// took a stale return address for a frame's, and ones that kept the outer
// part of a cut stack that had changed beyond the cut.)
func TestStackReuse(t *testing.T) {
	dir := t.TempDir()
	for seed := uint64(1); seed <= 4; seed++ {
		src := filepath.Join(dir, fmt.Sprintf("random%d.c", seed))
		if err := os.WriteFile(src, []byte(randomProgram(seed, 350)), 0o644); err != nil {
			t.Fatal(err)
		}
		opt := []string{"-O2", "-O0"}[seed%2] // each seed built one way: both ways are covered
		prog := fixture.Build(t, src, "-g", opt)
		for _, limit := range []int{0, record.MaxFramesLimit} {
			reused, whole := recordBothWays(t, prog, limit, filepath.Join(dir, fmt.Sprintf("%d%s-%d", seed, opt, limit)))
			cut := 0
			for i := range reused {
				if strings.Contains(whole[i], "not recorded]") {
					cut++
				}
				if reused[i] != whole[i] {
					t.Errorf("seed %d %s limit %d: event %d has stack\n%s\nunwound whole:\n%s", seed, opt, limit, i, reused[i], whole[i])
					break
				}
			}
			if limit == record.MaxFramesLimit && cut > 0 {
				t.Errorf("seed %d %s limit %d: %d of %d events have cut stacks", seed, opt, limit, cut, len(whole))
			}
			if slices.Equal(reused[:1], []string{""}) {
				t.Errorf("seed %d %s: the first event has no stack", seed, opt)
			}
		}
	}
}

// notRecorded returns how many frames a stack of eventStacks says it left
// out: -1 for a whole stack, 0 for one cut and not counted.
func notRecorded(stack string) int {
	i := strings.LastIndex(stack, "[")
	if i < 0 {
		return -1
	}
	var n int
	if _, err := fmt.Sscanf(stack[i:], "[%d not recorded]", &n); err != nil {
		return -1
	}
	return n
}

// TestCutStackReuse checks the reuse of the outer part of a cut stack (its
// frames beyond the cut, and so their count, included) against unwinding
// every stack whole: random programs whose recursions cross the depth
// limit both ways, recorded at several limits, give every event the same
// call stack and the same number of frames not recorded; one recurses
// deeper than the limit and the MaxFramesLimit frames counted beyond it.
// A reuse that kept the previous stack's count where the part above the
// reused frames got deeper or shallower fails it.
func TestCutStackReuse(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		seed      uint64
		recursion int
		opt       string
	}{{5, 350, "-O2"}, {6, 350, "-O0"}, {7, 1100, "-O2"}} {
		src := filepath.Join(dir, fmt.Sprintf("random%d.c", c.seed))
		if err := os.WriteFile(src, []byte(randomProgram(c.seed, c.recursion)), 0o644); err != nil {
			t.Fatal(err)
		}
		prog := fixture.Build(t, src, "-g", c.opt)
		for _, limit := range []int{16, 64, 256} {
			name := fmt.Sprintf("seed %d %s limit %d", c.seed, c.opt, limit)
			reused, whole := recordBothWays(t, prog, limit, filepath.Join(dir, fmt.Sprintf("%d-%d", c.seed, limit)))
			// How the stacks of consecutive events compare: the
			// cases the reuse must get right.
			var deeper, shallower, cutToWhole, wholeToCut, uncounted int
			for i := range whole {
				if reused[i] != whole[i] {
					t.Errorf("%s: event %d has stack\n%s\nunwound whole:\n%s", name, i, reused[i], whole[i])
					break
				}
				n := notRecorded(whole[i])
				if n == 0 {
					uncounted++
				}
				if i == 0 {
					continue
				}
				switch prev := notRecorded(whole[i-1]); {
				case prev > 0 && n > prev:
					deeper++
				case prev > 0 && n > 0 && n < prev:
					shallower++
				case prev >= 0 && n < 0:
					cutToWhole++
				case prev < 0 && n >= 0:
					wholeToCut++
				}
			}
			t.Logf("%s: %d events, %d cut deeper than the one before, %d shallower, %d whole after cut, %d cut after whole, %d uncounted",
				name, len(whole), deeper, shallower, cutToWhole, wholeToCut, uncounted)
			if deeper == 0 || shallower == 0 || cutToWhole == 0 || wholeToCut == 0 {
				t.Errorf("%s: %d events cut deeper than the one before, %d shallower, %d whole after a cut one, %d cut after a whole one: want some of each",
					name, deeper, shallower, cutToWhole, wholeToCut)
			}
			if c.recursion-50 > limit+record.MaxFramesLimit && uncounted == 0 {
				t.Errorf("%s: no stack deeper than the frames counted beyond the limit", name)
			}
		}
	}
}
