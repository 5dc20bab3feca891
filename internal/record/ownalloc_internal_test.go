package record

import (
	"reflect"
	"testing"
)

// TestParseOwnAlloc decodes own_alloc strings as agents send them, and as
// a broken agent could: names before any object, objects without names,
// an object named twice, no terminating NUL. None makes a warning
// without a function to name.
func TestParseOwnAlloc(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    []ownAllocator
		patched bool
	}{
		{"", nil, false},
		{"!\x00", nil, true},
		{"!\x00@/lib/a.so\x00free\x00", []ownAllocator{{object: "/lib/a.so", funcs: []string{"free"}}}, true},
		{"@\x00malloc\x00free\x00", []ownAllocator{{object: "/bin/x", executable: true, funcs: []string{"malloc", "free"}}}, false},
		{"malloc\x00@/lib/a.so\x00@\x00_Znwm\x00@/lib/a.so\x00free", []ownAllocator{
			{object: "/lib/a.so", funcs: []string{"free"}}, {object: "/bin/x", executable: true, funcs: []string{"_Znwm"}}}, false},
		{"@/lib/a.so\x00\x00\x00", nil, false},
	} {
		got, patched := parseOwnAlloc([]byte(c.in), "/bin/x")
		if patched != c.patched {
			t.Errorf("parseOwnAlloc(%q) patched = %v, want %v", c.in, patched, c.patched)
		}
		if len(got) == 0 && len(c.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseOwnAlloc(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
	for _, c := range []struct {
		o        ownAllocator
		patching bool
		want     string
	}{
		{ownAllocator{object: "/bin/x", executable: true, funcs: []string{"malloc"}}, false,
			"the program defines malloc itself: calls to it do not pass through memtrail and are not recorded " +
				"(memtrail run -patch-own-allocator=false left them alone)"},
		{ownAllocator{object: "/bin/x", executable: true, funcs: []string{"malloc", "free"}}, true,
			"the program defines malloc and free itself, in a way memtrail cannot patch: " +
				"calls to them do not pass through memtrail and are not recorded"},
		{ownAllocator{object: "/lib/a.so", funcs: []string{"free", "_ZdlPv", "_ZdlPvm", "_Znam"}}, true,
			"/lib/a.so, loaded before memtrail's agent, defines free, operator delete and operator new[] itself: " +
				"calls to them do not pass through memtrail and are not recorded"},
		{ownAllocator{object: "/bin/x", executable: true, funcs: []string{"_Znwm", "_ZdlPv"}}, false,
			"the program defines operator new and operator delete itself: calls to them do not pass through memtrail " +
				"and are not recorded; what they allocate through malloc is recorded as malloc and free " +
				"(memtrail run -patch-own-allocator=false left them alone)"},
	} {
		if got := c.o.warning(c.patching); got != c.want {
			t.Errorf("%+v: %q, want %q", c.o, got, c.want)
		}
	}
}
