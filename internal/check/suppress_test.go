package check

import (
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/analysis"
)

const mixed = `# LeakSanitizer's lines and valgrind's blocks in one file
leak:libfontconfig
leak:^make_tree$

{
   node lists
   Memcheck:Leak
   match-leak-kinds: definite,indirect
   fun:malloc
   fun:new_node
   ...
   fun:main
}
{
   not a leak
   Memcheck:Cond
   fun:strlen
   obj:/usr/lib/*
}
{
   C++
   Memcheck:Leak
   fun:_Znwm
   fun:_ZN6Widget4makeEv
   obj:*/prog
}
`

func TestParse(t *testing.T) {
	sups, err := Parse(strings.NewReader(mixed), "mixed.supp")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range sups {
		got = append(got, s.Name+"@"+s.Source)
	}
	want := "leak:libfontconfig@mixed.supp:2 leak:^make_tree$@mixed.supp:3 node lists@mixed.supp:5 C++@mixed.supp:20"
	if strings.Join(got, " ") != want {
		t.Errorf("parsed %q\nwant %q", strings.Join(got, " "), want)
	}
	// The mangled name without wildcards is matched as memtrail writes it.
	if f := sups[3].frames[1]; f.pattern != "Widget::make()" {
		t.Errorf("fun:_ZN6Widget4makeEv became %q, want Widget::make()", f.pattern)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"leak:\n", "x.supp:1: leak: needs a pattern"},
		{"leak:a\nrace:b\n", `x.supp:2: "race:b" is neither a leak:PATTERN line`},
		{"{\n  name\n  Memcheck:Leak\n  fun:a\n", `has no closing }`},
		{"{\n  name\n  Memcheck:Leak\n}\n", "x.supp:4: the valgrind suppression \"name\" has no frame lines"},
		{"{\n  name\n  fun:malloc\n}\n", "second line is Tool:Kind"},
		{"{\n  name\n  Memcheck:Leak\n  fn:malloc\n}\n", `x.supp:4: "fn:malloc" is not a frame line`},
		{"{\n}\n", "needs a name"},
	} {
		_, err := Parse(strings.NewReader(c.text), "x.supp")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", c.text, err, c.want)
		}
	}
}

func TestMatches(t *testing.T) {
	frames := func(spec string) []analysis.Frame {
		var fs []analysis.Frame
		for _, part := range strings.Split(spec, " ") {
			fn, obj, _ := strings.Cut(part, "@")
			fs = append(fs, analysis.Frame{Function: fn, File: "/src/" + fn + ".c", Object: obj})
		}
		return fs
	}
	sups, err := Parse(strings.NewReader(mixed+"leak:*tree*draw\n"), "mixed.supp")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Suppression{}
	for _, s := range sups {
		byName[s.Name] = s
	}
	for _, c := range []struct {
		sup, stack string
		want       bool
	}{
		{"leak:libfontconfig", "FcInit@/usr/lib/libfontconfig.so.1 main@/bin/prog", true},
		{"leak:libfontconfig", "g_malloc@/usr/lib/libglib.so main@/bin/prog", false},
		{"leak:^make_tree$", "alloc@/bin/prog make_tree@/bin/prog main@/bin/prog", true},
		{"leak:^make_tree$", "make_tree2@/bin/prog main@/bin/prog", false},
		{"leak:^make_tree$", "remake_tree@/bin/prog", false},
		{"leak:*tree*draw", "subtree_redraw@/bin/prog", true},
		{"leak:*tree*draw", "tree@/bin/prog", false},
		// valgrind's stacks begin with the allocator, memtrail's do not.
		{"node lists", "new_node@/bin/prog list_push@/bin/prog load@/bin/prog main@/bin/prog", true},
		{"node lists", "new_node@/bin/prog main@/bin/prog", true}, // ... may be empty
		{"node lists", "new_node@/bin/prog list_push@/bin/prog", false},
		{"node lists", "list_push@/bin/prog new_node@/bin/prog main@/bin/prog", false},
		{"C++", "Widget::make()@/opt/prog main@/opt/prog", true},
		{"C++", "Widget::make()@/opt/prog main@/opt/other", false},
		{"C++", "Gadget::make()@/opt/prog main@/opt/prog", false},
	} {
		if got := byName[c.sup].Matches(frames(c.stack)); got != c.want {
			t.Errorf("%s on %s: %v, want %v", c.sup, c.stack, got, c.want)
		}
	}
	// glibc's internal names go by their exported ones.
	strdup, err := Parse(strings.NewReader("{\n s\n Memcheck:Leak\n fun:malloc\n fun:strdup\n fun:keep\n}\n"), "s")
	if err != nil {
		t.Fatal(err)
	}
	if !strdup[0].Matches(frames("__GI___strdup@/lib/libc.so.6 keep@/bin/prog")) {
		t.Error("fun:strdup does not match glibc's __GI___strdup")
	}
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		pattern, text string
		want          bool
	}{
		{"*", "", true}, {"a*c", "abbc", true}, {"a*c", "abbd", false}, {"a?c", "abc", true},
		{"a?c", "ac", false}, {"**x", "yyx", true}, {"/usr/lib/*", "/usr/lib/libc.so", true},
	} {
		if got := glob(c.pattern, c.text); got != c.want {
			t.Errorf("glob(%q, %q) = %v, want %v", c.pattern, c.text, got, c.want)
		}
	}
}

func TestMatchLeakKinds(t *testing.T) {
	sups, err := Parse(strings.NewReader(`{
   defs
   Memcheck:Leak
   match-leak-kinds: definite,indirect
   fun:a
}
{
   every
   Memcheck:Leak
   match-leak-kinds: all
   fun:b
}
leak:c
`), "k.supp")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sup  int
		kind string
		want bool
	}{
		{0, "definite", true}, {0, "indirect", true}, {0, "possible", false}, {0, "reachable", false},
		{1, "possible", true}, {2, "reachable", true},
	} {
		if got := sups[c.sup].MatchesKind(c.kind); got != c.want {
			t.Errorf("%s on %s: %v, want %v", sups[c.sup].Name, c.kind, got, c.want)
		}
	}
	if _, err := Parse(strings.NewReader("{\n x\n Memcheck:Leak\n match-leak-kinds: lost\n fun:a\n}\n"), "k.supp"); err == nil ||
		!strings.Contains(err.Error(), `k.supp:4: unknown leak kind "lost"`) {
		t.Errorf("an unknown leak kind: %v", err)
	}
}
