package analysis_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
)

// A stack through an inlined function, an object without symbols for the
// address, and a node lost with a damaged part of the trace.
const stacksTrace = `
info time-unit=1
process id=1 pid=100 exe=/bin/prog args=[prog]
object id=1 path=/bin/prog
object id=2 path=/usr/lib/libfoo.so.1
module process=1 id=1 object=1 base=0x400000
module process=1 id=2 object=2 base=0x7f0000000000
# main, called from libfoo, called from main, which calls a function
# whose call to malloc is inlined.
node process=1 id=1 parent=0 module=1 offset=0x1100
node process=1 id=2 parent=1 module=2 offset=0x1234
node process=1 id=3 parent=2 module=1 offset=0x1200
# A stack whose outer part was lost.
node process=1 id=4 parent=99 module=1 offset=0x1200
alloc process=1 thread=1 time=10 api=malloc addr=0x1000 size=16 stack=3
alloc process=1 thread=1 time=10 api=malloc addr=0x2000 size=16 stack=4
alloc process=1 thread=1 time=10 api=malloc addr=0x3000 size=16 stack=0
process-end id=1 time=20 how=exited
string id=1 value=main
string id=2 value=main.c
string id=3 value=grow
string id=4 value=vec.h
symbol object=1 offset=0x1100 frames=1:2:10
symbol object=1 offset=0x1200 frames=3:4:7;1:2:20
object-status object=1 status=full
object-status object=2 status=missing message="no such file"
end time=20 events=3
`

func TestStacks(t *testing.T) {
	m := analyzeText(t, stacksTrace)
	p := m.Processes[0]
	for _, tt := range []struct {
		stack uint64
		want  string
	}{
		{3, "grow vec.h:7 inlined /bin/prog+0x1200 | main main.c:20 /bin/prog+0x1200 | " +
			"libfoo.so.1+0x1234 /usr/lib/libfoo.so.1+0x1234 | main main.c:10 /bin/prog+0x1100"},
		{4, "grow vec.h:7 inlined /bin/prog+0x1200 | main main.c:20 /bin/prog+0x1200 | ?? +0x0"},
		{0, ""},
		{42, "?? +0x0"},
	} {
		var frames []string
		for _, f := range p.Stack(tt.stack) {
			s := f.Name()
			if f.File != "" {
				s += fmt.Sprintf(" %s:%d", f.File, f.Line)
			}
			if f.Inlined {
				s += " inlined"
			}
			frames = append(frames, s+fmt.Sprintf(" %s+0x%x", f.Object, f.Address))
		}
		if got := strings.Join(frames, " | "); got != tt.want {
			t.Errorf("stack %d:\n got %s\nwant %s", tt.stack, got, tt.want)
		}
	}

	var objs []string
	for _, o := range p.Objects() {
		objs = append(objs, fmt.Sprintf("%s %v %q", o.Path, o.Status, o.StatusMessage))
	}
	if got, want := strings.Join(objs, "; "), `/bin/prog full ""; /usr/lib/libfoo.so.1 file missing "no such file"`; got != want {
		t.Errorf("objects:\n got %s\nwant %s", got, want)
	}
}

func TestTopSites(t *testing.T) {
	m := analyzeText(t, `
process id=1 pid=100
alloc process=1 thread=1 time=1 api=malloc addr=0x1000 size=10 stack=3
alloc process=1 thread=1 time=2 api=malloc addr=0x2000 size=10 stack=2
alloc process=1 thread=1 time=3 api=malloc addr=0x3000 size=5 stack=1
alloc process=1 thread=1 time=4 api=malloc addr=0x4000 size=5 stack=1
alloc process=1 thread=1 time=5 api=malloc addr=0x5000 size=1 stack=4
free process=1 thread=1 time=6 api=free addr=0x5000 stack=4
end time=6 events=6
`)
	p := m.Processes[0]
	stacks := func(sites []*analysis.Site) string {
		var ids []string
		for _, s := range sites {
			ids = append(ids, fmt.Sprint(s.Stack))
		}
		return strings.Join(ids, " ")
	}
	// 1 has as many bytes as 2 and 3 but more blocks; 2 and 3 tie, and go
	// by stack ID. 4 has nothing live at exit.
	if got, want := stacks(p.TopSites(analysis.ByPeak, 0)), "1 2 3 4"; got != want {
		t.Errorf("by peak: %s, want %s", got, want)
	}
	if got, want := stacks(p.TopSites(analysis.ByInUseAtExit, 0)), "1 2 3"; got != want {
		t.Errorf("by in use at exit: %s, want %s", got, want)
	}
	if got, want := stacks(p.TopSites(analysis.ByAllocations, 2)), "1 2"; got != want {
		t.Errorf("by allocations, top 2: %s, want %s", got, want)
	}
	if got, want := stacks(p.TopSites(analysis.ByTemporary, 0)), "4"; got != want {
		t.Errorf("by temporary: %s, want %s", got, want)
	}
}
