package analysis

import (
	"bytes"
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
process id=1 pid=10 exe=/home/me/prog
process id=2 pid=20 exe=/home/me/other
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

// TestTypeNames analyzes the trace: Module records say which objects each
// process maps, Type records what types each object has.
func TestTypeNames(t *testing.T) {
	data, err := tracetext.Encode(typesTrace)
	if err != nil {
		t.Fatal(err)
	}
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Analyze(r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	procs := map[uint64]*Process{}
	for _, p := range m.Processes {
		procs[p.ID] = p
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
