package analysis

import (
	"slices"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
	"github.com/memtrail/memtrail/internal/trace/tracetext"
)

// Two processes share a library of the program's; one also maps the C
// library, which has no types (the recorder writes none for it); an
// object no process maps has a type of a size the others have too.
const typesTrace = `
info time-unit=1
object id=1 path=/home/me/prog
object id=2 path=/home/me/libshapes.so
object id=3 path=/lib/x86_64-linux-gnu/libc.so.6
object id=4 path=/home/me/other
object id=5 path=/home/me/plugin.so
module process=1 id=1 object=1 base=0x400000
module process=1 id=2 object=2 base=0x7f0000000000
module process=1 id=3 object=3 base=0x7f1000000000
module process=2 id=1 object=4 base=0x400000
module process=2 id=2 object=2 base=0x7f0000000000
type object=1 size=204 name=widget
type object=1 size=16 name=node_t
type object=1 size=16 name=node
type object=1 size=24 name=node
type object=2 size=16 name=node
type object=2 size=80 name=shapes::Polygon
type object=4 size=204 name=gadget
type object=5 size=204 name=plugin_state
`

// TestTypeNames reads the trace's records as the analysis does: Module
// records into each process's stack tree, the others into the shared
// symbols.
func TestTypeNames(t *testing.T) {
	recs, err := tracetext.Parse(typesTrace)
	if err != nil {
		t.Fatal(err)
	}
	syms := newSymbols()
	procs := map[uint64]*Process{1: {ID: 1, stacks: newStackTree(syms)}, 2: {ID: 2, stacks: newStackTree(syms)}}
	for _, rec := range recs {
		if rec.Kind == trace.KindModule {
			procs[rec.Module.Process].stacks.modules[rec.Module.ID] = rec.Module.Object
		} else {
			syms.record(rec)
		}
	}
	for _, tc := range []struct {
		process, size uint64
		want          []string
	}{
		{1, 204, []string{"widget"}},
		{1, 16, []string{"node", "node_t"}}, // node from the program and its library, once
		{1, 24, []string{"node"}},
		{1, 80, []string{"shapes::Polygon"}},
		{1, 8, nil},
		{2, 204, []string{"gadget"}},
		{2, 16, []string{"node"}},
		{2, 24, nil},
	} {
		if got := procs[tc.process].TypeNames(tc.size); !slices.Equal(got, tc.want) {
			t.Errorf("process %d: TypeNames(%d) = %q, want %q", tc.process, tc.size, got, tc.want)
		}
	}
	if got := (&Process{}).TypeNames(204); got != nil {
		t.Errorf("a process without stacks: TypeNames(204) = %q, want none", got)
	}
}
