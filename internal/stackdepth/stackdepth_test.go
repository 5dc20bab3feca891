package stackdepth

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// build compiles testdata/name with flags and -fstack-usage, and returns
// the program and the frame sizes gcc reported (frame and return address,
// by function).
func build(t *testing.T, name string, flags ...string) (prog, su string, usage map[string]StackUsage) {
	t.Helper()
	dir := t.TempDir()
	src, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	obj, prog := filepath.Join(dir, "prog.o"), filepath.Join(dir, "prog")
	for _, args := range [][]string{
		append(append([]string{"-g", "-fstack-usage"}, flags...), "-c", "-o", obj, src),
		{"-o", prog, obj},
	} {
		if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
			t.Fatalf("cc %v: %v\n%s", args, err, out)
		}
	}
	su = filepath.Join(dir, "prog.su")
	f, err := os.Open(su)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, err := ParseStackUsage(f, su)
	if err != nil {
		t.Fatal(err)
	}
	usage = map[string]StackUsage{}
	for _, l := range lines {
		usage[l.Function] = l
	}
	return prog, su, usage
}

func analyze(t *testing.T, prog string, opts Options) *Analysis {
	t.Helper()
	a, err := Analyze(prog, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func lookup(t *testing.T, a *Analysis, name string) *Function {
	t.Helper()
	fn := a.Lookup(name)
	if fn == nil {
		t.Fatalf("no function %s in %s", name, a.Path)
	}
	return fn
}

// chainFunctions are the functions of testdata/chain.c.
var chainFunctions = []string{"main", "a", "b", "c", "recurse", "callback", "call_pointer", "tail_callee", "tail_caller"}

// TestFramesAgainstStackUsage checks each frame of testdata/chain.c, at
// -O0 and -O2, against gcc -fstack-usage. The relation is exact: the
// frame found in the binary (the largest CFA offset less the return
// address, or, for -O0's frame-pointer code, the deepest the stack
// pointer goes in its code) plus the 8-byte return address is the .su
// number. Neither counts the red zone a leaf writes below its stack
// pointer, which is checked apart.
func TestFramesAgainstStackUsage(t *testing.T) {
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			prog, _, usage := build(t, "chain.c", opt)
			a := analyze(t, prog, Options{})
			for _, name := range chainFunctions {
				fn := lookup(t, a, name)
				su, ok := usage[name]
				if !ok {
					t.Fatalf("gcc gave no stack usage for %s", name)
				}
				if fn.Source == FromStackUsage {
					t.Fatalf("%s: frame taken from a .su file; the test wants the binary's", name)
				}
				if fn.Frame+returnAddress != su.Bytes {
					t.Errorf("%s: frame %d (%s) + return address = %d, -fstack-usage says %d", name, fn.Frame, fn.Source, fn.Frame+returnAddress, su.Bytes)
				}
				if opt == "-O2" && fn.CFIFrame+returnAddress != int64(su.Bytes) {
					t.Errorf("%s: the CFI alone says %d + return address, -fstack-usage %d", name, fn.CFIFrame, su.Bytes)
				}
				if opt == "-O0" && fn.Frame > returnAddress && fn.Source != FromCFIAndCode {
					t.Errorf("%s: frame from %s, want cfi+code at -O0 (frame pointer)", name, fn.Source)
				}
				if !strings.HasSuffix(fn.File, "chain.c") || fn.Line == 0 {
					t.Errorf("%s: source %s:%d, want chain.c", name, fn.File, fn.Line)
				}
				t.Logf("%-12s frame %5d + 8 = %5d, .su %5d (%s), red zone %d", name, fn.Frame, fn.Frame+8, su.Bytes, fn.Source, fn.RedZone)
			}
			// c holds 512 bytes; above 128 of them gcc -O2 uses the red zone
			// for the rest (the .su number leaves them out).
			if c := lookup(t, a, "c"); opt == "-O2" && (c.RedZone == 0 || c.RedZone > 128) {
				t.Errorf("c: red zone %d bytes, want some, at most 128", c.RedZone)
			}
		})
	}
}

// TestWorstCase checks the worst case and the deepest chain of
// testdata/chain.c: a -> b -> c is complete and equals the sum of its
// frames; main's chain is main, a, b, c; the recursion, the call through
// a pointer and printf are reported; the tail call is followed.
func TestWorstCase(t *testing.T) {
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			prog, _, usage := build(t, "chain.c", opt)
			a := analyze(t, prog, Options{})
			fa, fb, fc := lookup(t, a, "a"), lookup(t, a, "b"), lookup(t, a, "c")
			want := usage["a"].Bytes + usage["b"].Bytes + usage["c"].Bytes + fc.RedZone
			if fa.Depth != want || fa.Unbounded || fa.Incomplete {
				t.Errorf("a: worst case %d (unbounded %v, incomplete %v), want %d, complete: the .su sums of a, b, c (%d, %d, %d) and c's red zone %d",
					fa.Depth, fa.Unbounded, fa.Incomplete, want, usage["a"].Bytes, usage["b"].Bytes, usage["c"].Bytes, fc.RedZone)
			}
			main := lookup(t, a, "main")
			chain := a.Chain(main)
			var names []string
			var sum uint64
			for _, l := range chain {
				names = append(names, l.Function.Name)
				sum += l.Bytes
			}
			if !slices.Equal(names, []string{"main", "a", "b", "c"}) {
				t.Errorf("main's deepest chain %v, want main a b c", names)
			}
			if main.Depth != sum+fc.RedZone || main.Depth != usage["main"].Bytes+fa.Depth {
				t.Errorf("main: worst case %d, want the chain's %d + c's red zone %d = main's .su %d + a's %d",
					main.Depth, sum, fc.RedZone, usage["main"].Bytes, fa.Depth)
			}
			if !main.Unbounded || !main.Incomplete {
				t.Errorf("main reaches a recursion, a call through a pointer and printf: unbounded %v, incomplete %v", main.Unbounded, main.Incomplete)
			}
			_ = fb

			rec := lookup(t, a, "recurse")
			if !rec.Recursive || !rec.Unbounded || rec.Cycle < 0 || len(a.Cycles[rec.Cycle]) != 1 {
				t.Errorf("recurse: recursive %v, unbounded %v, cycle %d; want a cycle of itself", rec.Recursive, rec.Unbounded, rec.Cycle)
			}
			r := a.Reach(main)
			if len(r.Cycles) != 1 || a.Functions[a.Cycles[r.Cycles[0]][0]] != rec {
				t.Errorf("main reaches cycles %v, want recurse's", r.Cycles)
			}
			cp := lookup(t, a, "call_pointer")
			if r.Indirect[cp] != 1 || !cp.Incomplete || cp.Unbounded {
				t.Errorf("call_pointer: %d indirect calls, incomplete %v; want 1, incomplete", r.Indirect[cp], cp.Incomplete)
			}
			if callers := r.External["printf"]; len(callers) != 1 || callers[0] != main {
				t.Errorf("printf's callers %v, want main", callers)
			}

			caller, callee := lookup(t, a, "tail_caller"), lookup(t, a, "tail_callee")
			var kinds []CallKind
			for _, c := range caller.Calls {
				if c.Callee >= 0 && a.Functions[c.Callee] == callee {
					kinds = append(kinds, c.Kind)
				}
			}
			switch opt {
			case "-O0":
				if !slices.Equal(kinds, []CallKind{Direct}) || caller.Depth != own(caller)+callee.Depth {
					t.Errorf("-O0 tail_caller: calls %v, worst case %d; want a direct call, %d", kinds, caller.Depth, own(caller)+callee.Depth)
				}
			case "-O2":
				if !slices.Equal(kinds, []CallKind{Tail}) || caller.Depth != callee.Depth {
					t.Errorf("-O2 tail_caller: calls %v, worst case %d; want a tail call, the callee's %d", kinds, caller.Depth, callee.Depth)
				}
				if ch := a.Chain(caller); len(ch) != 2 || ch[0].Bytes != 0 || !ch[1].Tail {
					t.Errorf("-O2 tail_caller's chain %+v: want itself counting 0, then its tail callee", ch)
				}
			}
		})
	}
}

// TestStackUsageFiles checks that frames come from .su files given, and
// that the .su lines are read right.
func TestStackUsageFiles(t *testing.T) {
	prog, su, usage := build(t, "chain.c", "-O2")
	for _, paths := range [][]string{{su}, {filepath.Dir(su)}} {
		a := analyze(t, prog, Options{StackUsage: paths})
		for _, name := range chainFunctions {
			fn := lookup(t, a, name)
			if fn.Source != FromStackUsage || fn.Frame+returnAddress != usage[name].Bytes || fn.StackUsage != int64(usage[name].Bytes) {
				t.Errorf("-su %v: %s frame %d from %s, want %d from su", paths, name, fn.Frame, fn.Source, usage[name].Bytes-returnAddress)
			}
			if fn.Line != usage[name].Line {
				t.Errorf("%s: line %d, want the .su's %d", name, fn.Line, usage[name].Line)
			}
		}
	}

	lines, err := ParseStackUsage(strings.NewReader(
		"x.c:3:5:plain\t48\tstatic\n"+
			"x.cc:9:1:int ns::A::f(int)\t16\tstatic\n"+
			"x.c:12:5:vla\t64\tdynamic\n"+
			"x.c:20:5:capped\t160\tdynamic,bounded\n"), "x.su")
	if err != nil {
		t.Fatal(err)
	}
	want := []StackUsage{
		{File: "x.c", Line: 3, Function: "plain", Bytes: 48},
		{File: "x.cc", Line: 9, Function: "int ns::A::f(int)", Bytes: 16},
		{File: "x.c", Line: 12, Function: "vla", Bytes: 64, Dynamic: true},
		{File: "x.c", Line: 20, Function: "capped", Bytes: 160, Dynamic: true, Bounded: true},
	}
	if !slices.Equal(lines, want) {
		t.Errorf("parsed %+v, want %+v", lines, want)
	}
	for _, bad := range []string{"x.c:3:5:f 48 static\n", "x.c:3:5:f\t48\tstatic,odd\n", "x.c:f\t48\tstatic\n", "x.c:3:5:f\tmany\tstatic\n"} {
		if _, err := ParseStackUsage(strings.NewReader(bad), "bad.su"); err == nil || !strings.Contains(err.Error(), "bad.su:1") {
			t.Errorf("%q: error %v, want one naming bad.su:1", bad, err)
		}
	}
}

// TestDynamicFrame checks that alloca is found in the code and marked
// as making the bound incomplete.
func TestDynamicFrame(t *testing.T) {
	prog, _, usage := build(t, "dynamic.c", "-O2")
	a := analyze(t, prog, Options{})
	fn := lookup(t, a, "grow")
	if !fn.Dynamic || !fn.Incomplete || !usage["grow"].Dynamic {
		t.Errorf("grow: dynamic %v, incomplete %v (.su dynamic %v); want both", fn.Dynamic, fn.Incomplete, usage["grow"].Dynamic)
	}
	if r := a.Reach(lookup(t, a, "main")); !slices.Contains(r.Dynamic, fn) {
		t.Errorf("main's reach %v does not name grow's dynamic frame", r.Dynamic)
	}
}
