package record_test

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/demo"
	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/record"
	"github.com/memtrail/memtrail/internal/trace"
	"github.com/memtrail/memtrail/internal/trace/tracetext"
)

// TestTypes records a program and a library of its own, which print the
// types they define with the sizes the compiler gave them. The trace must
// hold exactly those types for the program and for the library, and none
// for the system's libraries (the C library among them, whose debug info
// may well be installed).
func TestTypes(t *testing.T) {
	lib := fixture.Build(t, src("typelib.c"), "-g", "-O0", "-shared", "-fPIC")
	prog := fixture.Build(t, src("types.cc"))
	rec := recordArgs(t, "", prog, lib)
	want := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(rec.stdout))
	for sc.Scan() {
		where, typ, ok := strings.Cut(sc.Text(), " ")
		size, name, ok2 := strings.Cut(typ, " ")
		if _, err := strconv.ParseUint(size, 10, 64); !ok || !ok2 || err != nil {
			t.Fatalf("the program printed %q, want exe or lib, a size and a name", sc.Text())
		}
		path := map[string]string{"exe": prog, "lib": lib}[where]
		want[path] = append(want[path], name+" "+size)
	}
	for _, types := range want {
		slices.Sort(types)
	}
	if len(want[prog]) == 0 || len(want[lib]) == 0 {
		t.Fatalf("the program printed no types for itself or its library:\n%s", rec.stdout)
	}

	objects, types := readTypes(t, rec.res.Path)
	got := map[string][]string{}
	for obj, list := range types {
		for _, ty := range list {
			got[objects[obj]] = append(got[objects[obj]], ty.Name+" "+strconv.FormatUint(ty.Size, 10))
		}
		slices.Sort(got[objects[obj]])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the trace's types by object:\n\t%v\nthe program printed\n\t%v", got, want)
	}
	var system []string
	for _, path := range objects {
		if strings.HasPrefix(filepath.Base(path), "libc.so") || strings.HasPrefix(filepath.Base(path), "libstdc++") {
			system = append(system, path)
		}
	}
	if len(system) < 2 {
		t.Errorf("the trace's objects %v lack the C and C++ libraries: their having no types tests nothing", objects)
	}
}

// TestDemoTypes records the bundled widget demo as `memtrail demo` builds
// it: as in the mprof paper, the only type of 204 bytes (an enum and 50
// ints) is widget, named by a typedef of an anonymous struct.
func TestDemoTypes(t *testing.T) {
	dir := t.TempDir()
	prog, err := demo.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := record.Run(record.Options{Args: []string{prog}, Output: filepath.Join(dir, "widget.mtr"),
		AgentPath: fixture.Agent(t), Log: io.Discard, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	objects, types := readTypes(t, res.Path)
	var names []string
	for obj, list := range types {
		if objects[obj] != prog {
			t.Errorf("types of %s, which is no object of the program: %v", objects[obj], list)
		}
		for _, ty := range list {
			if ty.Size == 204 {
				names = append(names, ty.Name)
			}
		}
	}
	if !slices.Equal(names, []string{"widget"}) {
		t.Errorf("types of 204 bytes: %q, want widget", names)
	}
}

// readTypes reads the trace at path and returns its objects' paths and
// Type records, by object ID.
func readTypes(t *testing.T, path string) (objects map[uint64]string, types map[uint64][]trace.Type) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := tracetext.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	objects, types = map[uint64]string{}, map[uint64][]trace.Type{}
	for _, rec := range recs {
		switch rec.Kind {
		case trace.KindObject:
			objects[rec.Object.ID] = rec.Object.Path
		case trace.KindType:
			types[rec.Type.Object] = append(types[rec.Type.Object], *rec.Type)
		}
	}
	return objects, types
}
