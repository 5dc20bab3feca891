package symbolize

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// findCall returns the pc (return address - 1) of the first call from the
// function named caller (demangled, without parameters, as objdump names
// it: "ns::Widget::make") to a target whose name contains callee.
func findCall(t *testing.T, bin, caller, callee string) uint64 {
	t.Helper()
	for _, in := range callSitesOf(disassemble(t, bin)) {
		name := demangleName(in.function)
		if i := strings.IndexByte(name, '('); i >= 0 {
			name = name[:i]
		}
		if name == caller && strings.Contains(in.callee, callee) {
			return in.pc
		}
	}
	t.Fatalf("%s: no call from %s to %s", bin, caller, callee)
	return 0
}

func open(t *testing.T, path string, buildID []byte) *Object {
	t.Helper()
	o, err := Options{DebugRoot: t.TempDir(), CacheDir: t.TempDir()}.Open(path, buildID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func wantStatus(t *testing.T, o *Object, want Status) {
	t.Helper()
	if got, message := o.Status(); got != want {
		t.Fatalf("Status() = %v (%s), want %v", got, message, want)
	}
}

func wantFrames(t *testing.T, o *Object, pc uint64, want ...Frame) {
	t.Helper()
	if got := o.Frames(pc); !reflect.DeepEqual(got, want) {
		t.Errorf("Frames(%#x) =\n\t%v\nwant\n\t%v", pc, got, want)
	}
}

// debugFlags are the ways of producing DWARF that every known-frames test
// is run with.
var debugFlags = [][]string{
	{"-gdwarf-4"},
	{"-gdwarf-5"},
	{"-g", "-gz"},           // SHF_COMPRESSED sections (zlib)
	{"-g", "-gz=zlib-gnu"},  // .zdebug_* sections
	{"-g", "-no-pie"},       // ET_EXEC
	{"-g", "-pie", "-fPIE"}, // ET_DYN
}

func TestKnownFrames(t *testing.T) {
	src := testdataPath(t, "basic.c")
	line := markers(t, "basic.c")
	for _, flags := range debugFlags {
		t.Run(strings.Join(flags, ""), func(t *testing.T) {
			bin := buildFixture(t, []string{"basic.c"}, append([]string{"-O0"}, flags...)...)
			o := open(t, bin, nil)
			wantStatus(t, o, Full)
			wantFrames(t, o, findCall(t, bin, "new_node", "malloc"), Frame{"new_node", src, line["new_node.malloc"]})
			wantFrames(t, o, findCall(t, bin, "push", "new_node"), Frame{"push", src, line["push.new_node"]})
			wantFrames(t, o, findCall(t, bin, "free_list", "free"), Frame{"free_list", src, line["free_list.free"]})
			wantFrames(t, o, findCall(t, bin, "main", "push"), Frame{"main", src, line["main.push"]})
			wantFrames(t, o, findCall(t, bin, "main", "free_list"), Frame{"main", src, line["main.free_list"]})
		})
	}
}

func TestInlinedFrames(t *testing.T) {
	src := testdataPath(t, "inline.c")
	line := markers(t, "inline.c")
	for _, opt := range []string{"-O2", "-O3"} {
		for _, flags := range debugFlags {
			t.Run(opt+strings.Join(flags, ""), func(t *testing.T) {
				bin := buildFixture(t, []string{"inline.c"}, append([]string{opt}, flags...)...)
				o := open(t, bin, nil)
				wantStatus(t, o, Full)
				wantFrames(t, o, findCall(t, bin, "fill", "realloc"),
					Frame{"grow", src, line["grow.realloc"]},
					Frame{"fill", src, line["fill.grow"]})
				wantFrames(t, o, findCall(t, bin, "main", "fill"), Frame{"main", src, line["main.fill"]})
			})
		}
	}
}

func TestCppNames(t *testing.T) {
	src := testdataPath(t, "widget.cpp")
	line := markers(t, "widget.cpp")
	bin := buildFixture(t, []string{"widget.cpp"}, "-O0", "-g")
	o := open(t, bin, nil)
	wantStatus(t, o, Full)
	wantFrames(t, o, findCall(t, bin, "ns::Widget::make", "_Znwm"),
		Frame{"ns::Widget::make(char const*)", src, line["Widget::make.new"]})
	wantFrames(t, o, findCall(t, bin, "ns::Widget::add", "push_back"),
		Frame{"ns::Widget::add(int)", src, line["Widget::add.push_back"]})
	wantFrames(t, o, findCall(t, bin, "double* ns::allocate_array<double>", "_Znam"),
		Frame{"double* ns::allocate_array<double>(unsigned long)", src, line["allocate_array.new"]})
	wantFrames(t, o, findCall(t, bin, "ns::detail::index_words", "_Znwm"),
		Frame{"ns::detail::index_words(std::vector<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::allocator<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > > > const&)", src, line["index_words.new"]})

	pushBack := "std::vector<int, std::allocator<int> >::push_back(int const&)"
	frames := o.Frames(findCall(t, bin, "std::vector<int, std::allocator<int> >::push_back", "_M_realloc_insert"))
	if len(frames) != 1 || frames[0].Function != pushBack || !strings.HasSuffix(frames[0].File, "/stl_vector.h") {
		t.Errorf("call in push_back: got %v, want one frame of %s in stl_vector.h", frames, pushBack)
	}
}

// TestCppInlinedNames checks that the names of inlined C++ functions come
// through their abstract origins, demangled.
func TestCppInlinedNames(t *testing.T) {
	src := testdataPath(t, "widget.cpp")
	line := markers(t, "widget.cpp")
	for _, flags := range [][]string{{"-gdwarf-4"}, {"-g"}, {"-g", "-gz"}} {
		t.Run(strings.Join(flags, ""), func(t *testing.T) {
			bin := buildFixture(t, []string{"widget.cpp"}, append([]string{"-O2"}, flags...)...)
			o := open(t, bin, nil)
			frames := o.Frames(findCall(t, bin, "ns::Widget::add", "_M_realloc_insert"))
			if len(frames) < 2 {
				t.Fatalf("got %v, want push_back inlined into ns::Widget::add", frames)
			}
			if f := frames[len(frames)-1]; f != (Frame{"ns::Widget::add(int)", src, line["Widget::add.push_back"]}) {
				t.Errorf("outermost frame %v, want ns::Widget::add(int) at line %d", f, line["Widget::add.push_back"])
			}
			if f := frames[len(frames)-2]; f.Function != "std::vector<int, std::allocator<int> >::push_back(int const&)" || !strings.HasSuffix(f.File, "/stl_vector.h") {
				t.Errorf("inlined frame %v, want std::vector<int>::push_back in stl_vector.h", f)
			}
		})
	}
}

func TestSharedLibrary(t *testing.T) {
	src := testdataPath(t, "shape.c")
	line := markers(t, "shape.c")
	lib := buildFixture(t, []string{"shape.c"}, "-O0", "-g", "-shared", "-fPIC")
	o := open(t, lib, nil)
	wantStatus(t, o, Full)
	wantFrames(t, o, findCall(t, lib, "shape_new", "malloc"), Frame{"shape_new", src, line["shape_new.malloc"]})
	wantFrames(t, o, findCall(t, lib, "shape_new", "alloc_points"), Frame{"shape_new", src, line["shape_new.alloc_points"]})
	wantFrames(t, o, findCall(t, lib, "alloc_points", "calloc"), Frame{"alloc_points", src, line["alloc_points.calloc"]})

	// Optimized, alloc_points is inlined into the exported function.
	lib = buildFixture(t, []string{"shape.c"}, "-O2", "-g", "-shared", "-fPIC")
	o = open(t, lib, nil)
	wantFrames(t, o, findCall(t, lib, "shape_new", "calloc"),
		Frame{"alloc_points", src, line["alloc_points.calloc"]},
		Frame{"shape_new", src, line["shape_new.alloc_points"]})

	// Without debug info, the exported functions keep their names (from
	// .dynsym once stripped) and the static one is lost.
	lib = buildFixture(t, []string{"shape.c"}, "-O0", "-shared", "-fPIC")
	stripped := filepath.Join(t.TempDir(), "libshape.so")
	if err := run("", "objcopy", "--strip-all", lib, stripped); err != nil {
		t.Fatal(err)
	}
	o = open(t, stripped, nil)
	wantStatus(t, o, NoDebug)
	wantFrames(t, o, findCall(t, lib, "shape_new", "malloc"), Frame{Function: "shape_new"})
	wantFrames(t, o, findCall(t, lib, "shape_free", "free"), Frame{Function: "shape_free"})
	if frames := o.Frames(findCall(t, lib, "alloc_points", "calloc")); frames != nil {
		t.Errorf("static function in a stripped library: got %v, want nil", frames)
	}
}

// TestCrossUnitOrigins links with -flto: the functions inlined across
// files refer to their abstract instances in another compilation unit
// with DW_FORM_ref_addr.
func TestCrossUnitOrigins(t *testing.T) {
	bin := buildFixture(t, []string{"shape.c", "shape_main.c"}, "-O2", "-g", "-flto")
	o := open(t, bin, nil)
	wantStatus(t, o, Full)
	frames := o.Frames(findCall(t, bin, "main", "malloc"))
	var names []string
	for _, f := range frames {
		names = append(names, f.Function)
	}
	if want := []string{"shape_new", "main"}; !reflect.DeepEqual(names, want) {
		t.Errorf("malloc called from %v, want %v (shape_new inlined into main)", frames, want)
	}
	line := markers(t, "shape_main.c")
	if len(frames) == 2 && frames[1] != (Frame{"main", testdataPath(t, "shape_main.c"), line["main.shape_new"]}) {
		t.Errorf("outer frame %v, want main at shape_main.c:%d", frames[1], line["main.shape_new"])
	}
	a := compareWithAddr2line(t, o, bin, insideFunctions(t, o, disassemble(t, bin)))
	t.Logf("all instructions: %v", a)
	if a.unexplainedRate() > 0 {
		t.Errorf("unexplained differences with addr2line")
	}
}

// TestNoArangesSection removes .debug_aranges, as clang does not write
// it: compilation units are then found by their own ranges.
func TestNoArangesSection(t *testing.T) {
	full := buildFixture(t, []string{"widget.cpp"}, "-O2", "-g")
	bin := filepath.Join(t.TempDir(), "widget-no-aranges")
	if err := run("", "objcopy", "--remove-section=.debug_aranges", full, bin); err != nil {
		t.Fatal(err)
	}
	sameFrames(t, open(t, full, nil), open(t, bin, nil), full)
}

// sameFrames checks that two objects give the same frames for all
// instructions of bin.
func sameFrames(t *testing.T, want, got *Object, bin string) {
	t.Helper()
	insns := insideFunctions(t, want, disassemble(t, bin))
	differ := 0
	for _, in := range insns {
		w, g := want.Frames(in.pc), got.Frames(in.pc)
		if !reflect.DeepEqual(w, g) {
			if differ++; differ < 5 {
				t.Errorf("Frames(%#x) = %v, want %v", in.pc, g, w)
			}
		}
	}
	if differ > 0 {
		t.Errorf("%d of %d addresses differ", differ, len(insns))
	}
}

// TestZstdSections checks sections compressed with zstd, which gcc 12
// cannot write but objcopy can.
func TestZstdSections(t *testing.T) {
	full := buildFixture(t, []string{"inline.c"}, "-O2", "-g")
	bin := filepath.Join(t.TempDir(), "inline-zstd")
	if err := run("", "objcopy", "--compress-debug-sections=zstd", full, bin); err != nil {
		t.Skipf("objcopy cannot compress with zstd: %v", err)
	}
	// The compression header (Elf64_Chdr) starts with the type.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	info := f.Section(".debug_info")
	f.Close()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if info.Flags&elf.SHF_COMPRESSED == 0 || elf.CompressionType(binary.LittleEndian.Uint32(data[info.Offset:])) != elf.COMPRESS_ZSTD {
		t.Skip("objcopy did not compress with zstd")
	}
	o := open(t, bin, nil)
	wantStatus(t, o, Full)
	sameFrames(t, open(t, full, nil), o, full)
}

// TestSectionCache checks that decompressed sections are kept, read back
// with the same frames, and rewritten when a kept one is damaged.
func TestSectionCache(t *testing.T) {
	bin := buildFixture(t, []string{"inline.c"}, "-O2", "-g", "-gz")
	cache := t.TempDir()
	openCached := func() *Object {
		o, err := Options{DebugRoot: t.TempDir(), CacheDir: cache}.Open(bin, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.Close() })
		wantStatus(t, o, Full)
		return o
	}
	uncached := openUncached(t, bin)
	info, size := cachedInfo(t, bin, cache)

	sameFrames(t, uncached, openCached(), bin)
	if st, err := os.Stat(info); err != nil || uint64(st.Size()) != size {
		t.Fatalf("the cache holds no whole .debug_info (%d bytes): %v %v", size, st, err)
	}
	sameFrames(t, uncached, openCached(), bin) // read from the cache
	if err := os.Truncate(info, int64(size/2)); err != nil {
		t.Fatal(err)
	}
	sameFrames(t, uncached, openCached(), bin) // a damaged one is not used
	if st, err := os.Stat(info); err != nil || uint64(st.Size()) != size {
		t.Fatalf("the damaged .debug_info was not rewritten: %v %v", st, err)
	}
}

// TestSectionCachePlanted: a kept section another user owns (or could
// have changed) is not read, however well it fits: it is decompressed
// again and replaced by one of the user's own.
func TestSectionCachePlanted(t *testing.T) {
	uid, gid := fixture.OtherUser(t)
	bin := buildFixture(t, []string{"inline.c"}, "-O2", "-g", "-gz")
	cache := t.TempDir()
	opts := Options{DebugRoot: t.TempDir(), CacheDir: cache}
	uncached := openUncached(t, bin)
	info, size := cachedInfo(t, bin, cache)
	// A forged .debug_info of the right size: its one unit claims the
	// whole section and holds nothing a reader can use.
	forged := bytes.Repeat([]byte{0xff}, int(size))
	binary.LittleEndian.PutUint32(forged, uint32(size-4))
	if err := os.MkdirAll(filepath.Dir(info), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(info, forged, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(info, uid, gid); err != nil {
		t.Fatal(err)
	}
	o, err := opts.Open(bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	wantStatus(t, o, Full)
	sameFrames(t, uncached, o, bin)
	if st, err := os.Stat(info); err != nil || st.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
		t.Errorf("the planted section was not replaced: %v", err)
	}
}

// openUncached opens bin without a section cache, for the frames the
// cached opens must give.
func openUncached(t *testing.T, bin string) *Object {
	t.Helper()
	o, err := Options{DebugRoot: t.TempDir(), CacheDir: "-"}.Open(bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// cachedInfo returns where the section cache in cache keeps the
// .debug_info of bin, and that section's size.
func cachedInfo(t *testing.T, bin, cache string) (string, uint64) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return filepath.Join(cache, hex.EncodeToString(BuildID(f)), "info"), f.Section(".debug_info").Size
}

// splitDebug builds basic.c with -g, then moves its debug info to a
// separate file the way Debian's dh_strip does. It returns the stripped
// program (with a .gnu_debuglink when link is set), the debug file and
// the unstripped original.
func splitDebug(t *testing.T, dir string, link bool) (bin, debug, original string) {
	t.Helper()
	original = buildFixture(t, []string{"basic.c"}, "-O2", "-g")
	bin = filepath.Join(dir, "basic")
	debug = filepath.Join(dir, "basic.debug")
	steps := [][]string{
		{"objcopy", "--only-keep-debug", "--compress-debug-sections", original, debug},
		{"objcopy", "--strip-debug", "--strip-unneeded", original, bin},
	}
	if link {
		steps = append(steps, []string{"objcopy", "--add-gnu-debuglink=" + debug, bin})
	}
	for _, step := range steps {
		if err := run(dir, step[0], step[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	return bin, debug, original
}

func TestSeparateDebugFile(t *testing.T) {
	move := func(t *testing.T, from, to string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
	check := func(t *testing.T, root, bin, original, wantDebug string) {
		t.Helper()
		o, err := Options{DebugRoot: root}.Open(bin, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		status, message := o.Status()
		if status != Full || !strings.HasSuffix(message, wantDebug) {
			t.Fatalf("Status() = %v, %q; want Full from %s", status, message, wantDebug)
		}
		sameFrames(t, open(t, original, nil), o, original)
	}

	t.Run("debuglink beside", func(t *testing.T) {
		dir := t.TempDir()
		bin, debug, original := splitDebug(t, dir, true)
		check(t, t.TempDir(), bin, original, debug)
	})
	t.Run("debuglink in .debug", func(t *testing.T) {
		dir := t.TempDir()
		bin, debug, original := splitDebug(t, dir, true)
		moved := filepath.Join(dir, ".debug", "basic.debug")
		move(t, debug, moved)
		check(t, t.TempDir(), bin, original, moved)
	})
	t.Run("debuglink under root", func(t *testing.T) {
		dir, root := t.TempDir(), t.TempDir()
		bin, debug, original := splitDebug(t, dir, true)
		moved := filepath.Join(root, dir, "basic.debug")
		move(t, debug, moved)
		check(t, root, bin, original, moved)
	})
	t.Run("build-id", func(t *testing.T) {
		dir, root := t.TempDir(), t.TempDir()
		bin, debug, original := splitDebug(t, dir, false)
		id := fileBuildID(t, bin)
		moved := filepath.Join(root, ".build-id", hex.EncodeToString(id[:1]), hex.EncodeToString(id[1:])+".debug")
		move(t, debug, moved)
		check(t, root, bin, original, moved)
	})
	t.Run("debuglink with wrong CRC", func(t *testing.T) {
		dir := t.TempDir()
		bin, debug, _ := splitDebug(t, dir, true)
		// Another build's debug file, under the linked name: it has its
		// own build-id... and the program none, so only the CRC can tell.
		other := buildFixture(t, []string{"basic.c"}, "-O1", "-g")
		if err := run(dir, "objcopy", "--remove-section=.note.gnu.build-id", bin); err != nil {
			t.Fatal(err)
		}
		if err := run(dir, "objcopy", "--only-keep-debug", "--remove-section=.note.gnu.build-id", other, debug); err != nil {
			t.Fatal(err)
		}
		o := open(t, bin, nil)
		wantStatus(t, o, Stripped)
	})
	t.Run("build-id of another build", func(t *testing.T) {
		dir, root := t.TempDir(), t.TempDir()
		bin, debug, _ := splitDebug(t, dir, false)
		id := fileBuildID(t, bin)
		other := buildFixture(t, []string{"basic.c"}, "-O1", "-g")
		wrong := filepath.Join(root, ".build-id", hex.EncodeToString(id[:1]), hex.EncodeToString(id[1:])+".debug")
		if err := os.MkdirAll(filepath.Dir(wrong), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := run(dir, "objcopy", "--only-keep-debug", other, wrong); err != nil {
			t.Fatal(err)
		}
		os.Remove(debug)
		o, err := Options{DebugRoot: root}.Open(bin, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		wantStatus(t, o, Stripped)
	})
}

func fileBuildID(t *testing.T, path string) []byte {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id := BuildID(f)
	if len(id) < 2 {
		t.Fatalf("%s has no build-id", path)
	}
	return id
}

func TestBuildIDMatchesReadelf(t *testing.T) {
	bins := []string{
		buildFixture(t, []string{"basic.c"}, "-O0", "-g"),
		buildFixture(t, []string{"shape.c"}, "-O0", "-g", "-shared", "-fPIC"),
		"/usr/lib/x86_64-linux-gnu/libc.so.6",
	}
	re := regexp.MustCompile(`Build ID: ([0-9a-f]+)`)
	for _, bin := range bins {
		if _, err := os.Stat(bin); err != nil {
			continue
		}
		out, err := exec.Command("readelf", "-n", bin).Output()
		if err != nil {
			t.Skipf("readelf: %v", err)
		}
		m := re.FindSubmatch(out)
		if m == nil {
			t.Fatalf("readelf shows no build-id for %s", bin)
		}
		if got := hex.EncodeToString(fileBuildID(t, bin)); got != string(m[1]) {
			t.Errorf("BuildID(%s) = %s, readelf says %s", bin, got, m[1])
		}
	}
}

func TestBuildIDMismatch(t *testing.T) {
	bin := buildFixture(t, []string{"basic.c"}, "-O0", "-g")
	id := fileBuildID(t, bin)
	pc := findCall(t, bin, "new_node", "malloc")

	o := open(t, bin, id)
	wantStatus(t, o, Full)
	if o.Frames(pc) == nil {
		t.Errorf("matching build-id: no frames")
	}

	other := bytes.Clone(id)
	other[0] ^= 0xff
	o = open(t, bin, other)
	wantStatus(t, o, Mismatch)
	if frames := o.Frames(pc); frames != nil {
		t.Errorf("mismatching build-id: Frames = %v, want nil", frames)
	}
}

func TestMissingFile(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "gone"), nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing file) error = %v, want fs.ErrNotExist", err)
	}
	notELF := filepath.Join(t.TempDir(), "not-elf")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(notELF, nil); err == nil {
		t.Errorf("Open(non-ELF file) succeeded")
	}
}

// TestNoDebugInfo checks a program built without -g: names come from
// .symtab, with no file and line.
func TestNoDebugInfo(t *testing.T) {
	for _, flags := range [][]string{{"-O0"}, {"-O2"}, {"-O0", "-no-pie"}} {
		t.Run(strings.Join(flags, ""), func(t *testing.T) {
			bin := buildFixture(t, []string{"basic.c"}, flags...)
			o := open(t, bin, nil)
			wantStatus(t, o, NoDebug)
			for _, in := range callSitesOf(disassemble(t, bin)) {
				wantFrames(t, o, in.pc, Frame{Function: in.function})
			}
		})
	}
	bin := buildFixture(t, []string{"widget.cpp"}, "-O2")
	o := open(t, bin, nil)
	wantFrames(t, o, findCall(t, bin, "ns::Widget::make", "_Znwm"), Frame{Function: "ns::Widget::make(char const*)"})
}

// TestStripped checks a program without any symbol or debug info.
func TestStripped(t *testing.T) {
	bin := buildFixture(t, []string{"basic.c"}, "-O2", "-s")
	o := open(t, bin, nil)
	wantStatus(t, o, Stripped)
	for _, in := range callSitesOf(disassemble(t, bin)) {
		if frames := o.Frames(in.pc); frames != nil {
			t.Errorf("Frames(%#x) = %v, want nil", in.pc, frames)
		}
	}
}

// TestLibcDynamicSymbols checks names from .dynsym alone, on the system's
// stripped C library, against nm -D: every defined function is found by
// its start, middle and last byte under one of the names at its address.
func TestLibcDynamicSymbols(t *testing.T) {
	const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		t.Skip(err)
	}
	o := open(t, libc, nil) // with an empty debug root: libc6-dbg is not used
	wantStatus(t, o, NoDebug)
	out, err := exec.Command("nm", "-D", "-S", "--defined-only", libc).Output()
	if err != nil {
		t.Skipf("nm: %v", err)
	}
	type function struct{ addr, size uint64 }
	names := map[uint64][]string{}
	var functions []function
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line) // address size type name[@version]
		if len(fields) != 4 || !strings.ContainsAny(fields[2], "TtWi") {
			continue
		}
		addr, err1 := strconv.ParseUint(fields[0], 16, 64)
		size, err2 := strconv.ParseUint(fields[1], 16, 64)
		if err1 != nil || err2 != nil || size == 0 {
			continue
		}
		f := function{addr, size}
		name, _, _ := strings.Cut(fields[3], "@")
		if len(names[f.addr]) == 0 {
			functions = append(functions, f)
		}
		names[f.addr] = append(names[f.addr], name)
	}
	if len(functions) < 1000 {
		t.Fatalf("nm -D found only %d functions in %s", len(functions), libc)
	}
	checked, wrong := 0, 0
	for _, f := range functions {
		for _, pc := range []uint64{f.addr, f.addr + f.size/2, f.addr + f.size - 1} {
			checked++
			frames := o.Frames(pc)
			if len(frames) == 1 && frames[0].File == "" && frames[0].Line == 0 && slices.Contains(names[f.addr], frames[0].Function) {
				continue
			}
			if wrong++; wrong <= 5 {
				t.Errorf("Frames(%#x) = %v, want one of %v", pc, frames, names[f.addr])
			}
		}
	}
	t.Logf("%d addresses in %d functions, %d wrong", checked, len(functions), wrong)
}

// TestConcurrentFrames symbolizes one object from several goroutines (run
// with -race).
func TestConcurrentFrames(t *testing.T) {
	bin := buildFixture(t, []string{"widget.cpp"}, "-O2", "-g")
	reference := open(t, bin, nil)
	o := open(t, bin, nil)
	insns := insideFunctions(t, o, disassemble(t, bin))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(insns); i += 2 {
				o.Frames(insns[i].pc)
			}
		}()
	}
	wg.Wait()
	sameFrames(t, reference, o, bin)
}

// TestDwzAltFile checks debug info compressed by dwz into a supplementary
// file shared by several programs, as Debian's -dbgsym packages are:
// names then come from DW_FORM_GNU_strp_alt strings and through
// DW_FORM_GNU_ref_alt references into the file .gnu_debugaltlink names.
func TestDwzAltFile(t *testing.T) {
	if _, err := exec.LookPath("dwz"); err != nil {
		t.Skipf("dwz not installed: %v", err)
	}
	dir := t.TempDir()
	var originals, copies []string
	for _, opt := range []string{"-O2", "-O1"} {
		original := buildFixture(t, []string{"widget.cpp"}, opt, "-g")
		copied := filepath.Join(dir, "widget"+opt)
		data, err := os.ReadFile(original)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(copied, data, 0o755); err != nil {
			t.Fatal(err)
		}
		originals = append(originals, original)
		copies = append(copies, copied)
	}
	common := filepath.Join(dir, "common.debug")
	if err := run(dir, "dwz", append([]string{"-m", common, "-M", common}, copies...)...); err != nil {
		t.Fatal(err)
	}
	for i := range copies {
		f, err := elf.Open(copies[i])
		if err != nil {
			t.Fatal(err)
		}
		hasAltLink := f.Section(".gnu_debugaltlink") != nil
		f.Close()
		if !hasAltLink {
			t.Fatalf("dwz wrote no .gnu_debugaltlink in %s", copies[i])
		}
		o := open(t, copies[i], nil)
		wantStatus(t, o, Full)
		sameFrames(t, open(t, originals[i], nil), o, originals[i])
	}
}

// TestSplitDWARF checks a program built with -gsplit-dwarf: its .dwo
// files are not read, but its line table is, with names from .symtab.
func TestSplitDWARF(t *testing.T) {
	bin := buildFixture(t, []string{"inline.c"}, "-O2", "-g", "-gsplit-dwarf")
	o := open(t, bin, nil)
	wantStatus(t, o, Full)
	line := markers(t, "inline.c")
	wantFrames(t, o, findCall(t, bin, "fill", "realloc"), Frame{"fill", testdataPath(t, "inline.c"), line["grow.realloc"]})
}
