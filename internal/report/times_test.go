package report_test

import (
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/report"
)

// TestTimesInTheUnit reports on a process of a 1 ms trace whose peak came
// in its first millisecond, stamped before the start (the recorder's
// clock lags behind): the report says so, not "0 ns after start", and
// writes the later times in whole milliseconds, which is all the trace
// knows of them.
func TestTimesInTheUnit(t *testing.T) {
	m := analyze(t, encode(t, `info time-unit=1000000 command=[./prog]
process id=1 pid=100 time=400000 exe=/bin/prog args=[prog]
thread process=1 index=1 tid=100
alloc process=1 thread=1 time=0 api=malloc addr=0x1000 size=4096 stack=0
free process=1 thread=1 time=6000000 api=free addr=0x1000 stack=0
alloc process=1 thread=1 time=7000000 api=malloc addr=0x2000 size=16 stack=0
process-end id=1 time=15300000 how=exited code=0
end time=15300000 events=3
`))
	var out strings.Builder
	if err := report.Text(&out, m, report.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"exited with status 0 after 15.3 ms", // the start and the end are exact
		"peak heap         4.00 KiB (4,096 bytes), in the first 1 ms\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "0 ns after start") {
		t.Errorf("a time in the first unit is written as 0 ns:\n%s", out.String())
	}
}
