package record_test

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestUntouchedBlocksStayOut records testdata/untouched.c, which allocates
// big blocks it never touches, in each way the allocator can have them
// untouched: the agent clears the part of a new block that may hold stale
// data (see TestLeakStaleWords), and must not bring those blocks into the
// program's memory doing so. The program's resident set under memtrail
// must stay within a bound of its native one, far below the blocks' size.
func TestUntouchedBlocksStayOut(t *testing.T) {
	prog := fixture.Build(t, src("untouched.c"))
	// The agent's own memory: its rings and tables, a few MiB.
	const boundKiB = 16 << 10
	for _, how := range []string{"mmap", "brk", "reused", "memalign", "realloc"} {
		t.Run(how, func(t *testing.T) {
			out, err := exec.Command(prog, how).Output()
			if err != nil {
				t.Fatalf("running natively: %v", err)
			}
			native := rssKiB(t, string(out))
			rec := recordArgs(t, "", prog, how)
			under := rssKiB(t, rec.stdout)
			t.Logf("%s: resident %d KiB natively, %d KiB under memtrail", how, native, under)
			if under > native+boundKiB {
				t.Errorf("resident %d KiB under memtrail, %d KiB natively: the agent touched the untouched block", under, native)
			}
		})
	}
}

func rssKiB(t *testing.T, out string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("the program's output %q is not its resident set", out)
	}
	return n
}
