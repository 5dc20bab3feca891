package symbolize

import (
	"bufio"
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// typesFixtures are the programs of TestTypes, with names their DWARF has
// that Types must leave out (see the sources for why).
var typesFixtures = []struct {
	source  string
	leftOut []string
}{
	{"types.c", []string{"node_ptr", "callback", "opaque", "opaque_t", "open_array", "empty",
		"_Reserved", "__reserved2", "__reserved2_t"}},
	{"types.cpp", []string{"size_type", "Tag"}},
}

// TestTypes checks Types against the programs' own word: each fixture
// prints the types it defines with the sizes the compiler gave them, built
// in several ways.
func TestTypes(t *testing.T) {
	for _, fx := range typesFixtures {
		for _, flags := range [][]string{
			{"-O0", "-g"},
			{"-O2", "-g"},
			{"-O0", "-gdwarf-4"},
			{"-O0", "-g", "-gz"},
		} {
			t.Run(fx.source+"/"+strings.Join(flags, ""), func(t *testing.T) {
				t.Parallel()
				bin := buildFixture(t, []string{fx.source}, flags...)
				want := typesPrinted(t, bin)
				got := open(t, bin, nil).Types(0)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("Types() =\n\t%v\nthe program says\n\t%v", got, want)
				}
				names := dwarfTypeNames(t, bin)
				for _, name := range fx.leftOut {
					if !names[name] {
						t.Errorf("%s is not in the DWARF: the test of leaving it out tests nothing", name)
					}
				}
			})
		}
	}
}

// TestTypesFromDebugFile reads the types from a separate debug file with
// compressed sections, as distributions install them.
func TestTypesFromDebugFile(t *testing.T) {
	dir := t.TempDir()
	original := buildFixture(t, []string{"types.c"}, "-O2", "-g")
	bin, debug := filepath.Join(dir, "types"), filepath.Join(dir, "types.debug")
	for _, step := range [][]string{
		{"objcopy", "--only-keep-debug", "--compress-debug-sections", original, debug},
		{"objcopy", "--strip-debug", "--add-gnu-debuglink=" + debug, original, bin},
	} {
		if err := run(dir, step[0], step[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	want := typesPrinted(t, original)
	if got := open(t, bin, nil).Types(0); !reflect.DeepEqual(got, want) {
		t.Errorf("Types() =\n\t%v\nthe program says\n\t%v", got, want)
	}
}

// TestTypesMax checks that a limit keeps the types with the shortest
// names, the first by name among names of one length.
func TestTypesMax(t *testing.T) {
	o := open(t, buildFixture(t, []string{"types.c"}, "-O0", "-g"), nil)
	all := o.Types(0)
	for _, limit := range []int{1, 3, len(all) - 1, len(all), len(all) + 1} {
		got := o.Types(limit)
		if len(got) != min(limit, len(all)) {
			t.Fatalf("Types(%d) returned %d types of %d", limit, len(got), len(all))
		}
		if !slices.IsSortedFunc(got, compareTypes) {
			t.Errorf("Types(%d) is not sorted: %v", limit, got)
		}
		kept := map[Type]bool{}
		longest := 0
		for _, ty := range got {
			kept[ty] = true
			longest = max(longest, len(ty.Name))
		}
		for _, ty := range all {
			shorter := len(ty.Name) < longest
			if shorter && !kept[ty] {
				t.Errorf("Types(%d) keeps a name of %d bytes but leaves out %v", limit, longest, ty)
			}
			if kept[ty] && len(ty.Name) == longest {
				for _, other := range all {
					if len(other.Name) == longest && compareTypes(other, ty) < 0 && !kept[other] {
						t.Errorf("Types(%d) keeps %v but not %v, before it by name", limit, ty, other)
					}
				}
			}
		}
	}
}

func TestTypesMismatch(t *testing.T) {
	o := open(t, buildFixture(t, []string{"types.c"}, "-O0", "-g"), []byte{1, 2, 3})
	wantStatus(t, o, Mismatch)
	if got := o.Types(0); got != nil {
		t.Errorf("Types() of a file with another build-id = %v, want nil", got)
	}
}

func TestReservedName(t *testing.T) {
	for name, want := range map[string]bool{
		"_IO_FILE": true, "__pthread_mutex_s": true, "__off_t": true, "_G_fpos_t": true,
		"FILE": false, "_private": false, "_": false, "x__y": false, "widget": false,
		"std::_Rb_tree_node<int>": false, "__gnu_cxx::__normal_iterator<int*>": false,
	} {
		if got := reservedName(name); got != want {
			t.Errorf("reservedName(%q) = %v, want %v", name, got, want)
		}
	}
}

// typesPrinted runs a types fixture and returns the types it prints, as
// "size name" lines, sorted as Types sorts them.
func typesPrinted(t *testing.T, bin string) []Type {
	t.Helper()
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("running %s: %v", bin, err)
	}
	var types []Type
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		size, name, ok := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseUint(size, 10, 64)
		if !ok || err != nil {
			t.Fatalf("%s printed %q, want a size and a name", bin, sc.Text())
		}
		types = append(types, Type{Name: name, Size: n})
	}
	if len(types) == 0 {
		t.Fatalf("%s printed no types", bin)
	}
	slices.SortFunc(types, compareTypes)
	return types
}

// dwarfTypeNames returns the DW_AT_name of every DIE of bin's DWARF, read
// by debug/dwarf alone.
func dwarfTypeNames(t *testing.T, bin string) map[string]bool {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for r := d.Reader(); ; {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			return names
		}
		if name, ok := e.Val(dwarf.AttrName).(string); ok {
			names[name] = true
		}
	}
}
