package analysis

import (
	"fmt"

	"github.com/memtrail/memtrail/internal/trace"
)

// LeakClasses returns how the blocks p still had allocated at its exit
// divide into memcheck's classes — definitely, indirectly and possibly
// lost, still reachable — or, if there is no classification to give, why
// not: a process scans its memory only at a normal exit, and only when
// recorded with memtrail run -leak-check; the classes are of the exit,
// not of the end of an earlier window.
func (p *Process) LeakClasses() (*trace.LeakScan, string) {
	switch {
	case p.Ended && p.How == trace.EndSignaled:
		return nil, fmt.Sprintf("killed by signal %d: no scan at exit", p.Code)
	case p.Ended && p.How == trace.EndExec:
		return nil, "replaced by exec: no scan at exit"
	case p.LeakScan == nil && !p.Ended:
		return nil, "the trace has no end of the process: no scan"
	case p.LeakScan == nil:
		return nil, "not scanned (record with memtrail run -leak-check)"
	case p.LeakScan.Error != "":
		return nil, "the scan at exit failed: " + p.LeakScan.Error
	case p.Window.To < p.RunTime():
		return nil, "the window ends before the exit, where the scan was"
	}
	return p.LeakScan, ""
}
