package analysis_test

import (
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace"
)

// TestLeakScanReasons checks that each way a process can end without a
// leak scan gives its own reason, and -leak-check=false only a process
// that called exit and was not scanned: the recorder scans every exit
// unless told not to.
func TestLeakScanReasons(t *testing.T) {
	for _, c := range []struct {
		ended bool
		how   trace.EndHow
		code  int64
		want  string
	}{
		{true, trace.EndSignaled, 9, "killed by signal 9 (SIGKILL): no scan at exit"},
		{true, trace.EndSignaled, 64, "killed by signal 64: no scan at exit"},
		{true, trace.EndExec, 0, "replaced by exec: no scan at exit"},
		{true, trace.EndExecUnrecorded, 0, "exec'd without memtrail: no scan at exit"},
		{true, trace.EndRunning, 0, "still running when recording stopped: no scan at exit"},
		{true, trace.EndUnknown, 0, "ended without calling exit, how not known (its parent reaped it first): no scan at exit"},
		{true, trace.EndExited, 0, "not scanned (recorded with -leak-check=false)"},
		{false, trace.EndUnknown, 0, "the trace has no end of the process: no scan"},
	} {
		p := &analysis.Process{Ended: c.ended, How: c.how, Code: c.code}
		if scan, why := p.LeakClasses(); scan != nil || why != c.want {
			t.Errorf("ended %v, %v %d: %v, %q; want %q", c.ended, c.how, c.code, scan, why, c.want)
		}
	}
}
