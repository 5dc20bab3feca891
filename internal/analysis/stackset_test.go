package analysis_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
)

// testStack is a call stack that allocated, for tests of the tables and
// trees: its functions, outermost first, separated by " > "; a frame
// written "f/g" is g inlined into f. Each of sizes is one allocation; the
// first kept of them are never freed.
type testStack struct {
	path  string
	sizes []uint64
	kept  int
}

// stacksProcess writes a trace in text form with the allocations of
// stacks, analyzes it and returns its process. Each function has one line,
// so that frames of a function are all alike; each frame is one return
// address.
func stacksProcess(t testing.TB, stacks []testStack) *analysis.Process {
	t.Helper()
	var b strings.Builder
	b.WriteString("info time-unit=1\n" +
		"process id=1 pid=100 exe=/src/prog args=[prog] cwd=/src\n" +
		"thread process=1 index=1 tid=100\n" +
		"object id=1 path=/src/prog\n" +
		"module process=1 id=1 object=1 base=0x400000\n" +
		"string id=1 value=prog.c\n")
	strs := map[string]int{}
	str := func(s string) int {
		if id, ok := strs[s]; ok {
			return id
		}
		id := len(strs) + 2
		strs[s] = id
		fmt.Fprintf(&b, "string id=%d value=%q\n", id, s)
		return id
	}
	offsets := map[string]uint64{}  // by frame
	nodes := map[[2]uint64]uint64{} // by parent and offset
	var symbols strings.Builder
	offset := func(frame string) uint64 {
		if off, ok := offsets[frame]; ok {
			return off
		}
		off := 0x1000 + 0x10*uint64(len(offsets))
		offsets[frame] = off
		fns := strings.Split(frame, "/")
		var parts []string
		for i := len(fns) - 1; i >= 0; i-- { // innermost first
			parts = append(parts, fmt.Sprintf("%d:1:%d", str(fns[i]), 10+str(fns[i])))
		}
		fmt.Fprintf(&symbols, "symbol object=1 offset=%#x frames=%s\n", off, strings.Join(parts, ";"))
		return off
	}
	var events strings.Builder
	addr, time := uint64(0x10000), 10
	var freeLater []uint64
	for _, st := range stacks {
		var node uint64
		for _, frame := range strings.Split(st.path, " > ") {
			key := [2]uint64{node, offset(frame)}
			id, ok := nodes[key]
			if !ok {
				id = uint64(len(nodes) + 1)
				nodes[key] = id
				fmt.Fprintf(&b, "node process=1 id=%d parent=%d module=1 offset=%#x\n", id, node, key[1])
			}
			node = id
		}
		for i, size := range st.sizes {
			fmt.Fprintf(&events, "alloc process=1 thread=1 time=%d api=malloc addr=%#x size=%d stack=%d\n", time, addr, size, node)
			if i >= st.kept {
				freeLater = append(freeLater, addr)
			}
			addr += 0x10000
			time++
		}
	}
	for _, a := range freeLater {
		fmt.Fprintf(&events, "free process=1 thread=1 time=%d api=free addr=%#x stack=0\n", time, a)
		time++
	}
	fmt.Fprintf(&events, "process-end id=1 time=%d how=exited code=0\n", time)
	b.WriteString(events.String())
	b.WriteString(symbols.String())
	fmt.Fprintf(&b, "end time=%d events=0\n", time)
	m := analyzeText(t, b.String())
	if len(m.Warnings) > 0 {
		t.Fatalf("warnings: %v", m.Warnings)
	}
	return m.Processes[0]
}

// allSites returns pointers to all the sites of p.
func allSites(p *analysis.Process) []*analysis.Site {
	return p.SiteList()
}
