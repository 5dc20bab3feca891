package symbolize

import (
	"debug/elf"
	"fmt"
	"os/exec"
	"path"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// agreement counts how often Frames and addr2line give the same answer,
// and keeps a few examples of each kind of difference. Kinds starting with
// "explained:" are known cases where addr2line is wrong or makes another
// choice; the others are unexplained.
type agreement struct {
	total, same, explained int
	kinds                  map[string]int
	examples               map[string][]string
}

const explainedPrefix = "explained: "

// unexplainedRate is the share of addresses whose difference has no
// explanation.
func (a *agreement) unexplainedRate() float64 {
	if a.total == 0 {
		return 0
	}
	return float64(a.total-a.same-a.explained) / float64(a.total)
}

func (a *agreement) add(b *agreement) {
	a.total += b.total
	a.same += b.same
	a.explained += b.explained
	for k, n := range b.kinds {
		a.kinds[k] += n
	}
	for k, e := range b.examples {
		if len(a.examples[k]) < 3 {
			a.examples[k] = append(a.examples[k], e[:min(len(e), 3-len(a.examples[k]))]...)
		}
	}
}

func newAgreement() *agreement {
	return &agreement{kinds: map[string]int{}, examples: map[string][]string{}}
}

func (a *agreement) String() string {
	var b strings.Builder
	percent := func(n int) float64 { return 100 * float64(n) / float64(max(a.total, 1)) }
	fmt.Fprintf(&b, "%d addresses: %d agree (%.2f%%), %d differ explainably (%.2f%%), %d differ otherwise (%.2f%%)",
		a.total, a.same, percent(a.same), a.explained, percent(a.explained), a.total-a.same-a.explained, 100*a.unexplainedRate())
	kinds := make([]string, 0, len(a.kinds))
	for k := range a.kinds {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(&b, "\n  %s: %d", k, a.kinds[k])
		for _, e := range a.examples[k] {
			fmt.Fprintf(&b, "\n    %s", e)
		}
	}
	return b.String()
}

// compareWithAddr2line symbolizes the given instructions of bin with o and
// with addr2line and tallies the differences.
func compareWithAddr2line(t testing.TB, o *Object, bin string, insns []instruction) *agreement {
	t.Helper()
	if len(insns) == 0 {
		t.Fatalf("%s: no instructions to compare", bin)
	}
	pcs := make([]uint64, len(insns))
	for i, in := range insns {
		pcs[i] = in.pc
	}
	want := addr2line(t, bin, pcs)
	got := make([][]Frame, len(pcs))
	kinds := make([]string, len(pcs))
	symbolsByAddr := sync.OnceValue(func() map[uint64][]string { return symbolNames(o) })
	var unexplained []int
	for i, pc := range pcs {
		got[i] = o.Frames(pc)
		kinds[i] = difference(got[i], want[i], unitFilesAt(o, pc, symbolsByAddr))
		if kinds[i] != "" && !strings.HasPrefix(kinds[i], explainedPrefix) {
			unexplained = append(unexplained, i)
		}
	}
	// Where LLVM's symbolizer is installed, it settles the rest: binutils
	// 2.40 misses some of clang's DWARF 5 (inlined functions with
	// DW_FORM_rnglistx ranges).
	if len(unexplained) > 0 {
		var disputed []uint64
		for _, i := range unexplained {
			disputed = append(disputed, pcs[i])
		}
		if second := llvmSymbolizer(t, bin, disputed); second != nil {
			for j, i := range unexplained {
				if reflect.DeepEqual(got[i], second[j]) {
					kinds[i] = explainedPrefix + "addr2line differs, llvm-symbolizer agrees with Frames (" + kinds[i] + ")"
				}
			}
		}
	}

	a := newAgreement()
	for i, pc := range pcs {
		a.total++
		kind := kinds[i]
		switch {
		case kind == "":
			a.same++
			continue
		case strings.HasPrefix(kind, explainedPrefix):
			a.explained++
		}
		a.kinds[kind]++
		if len(a.examples[kind]) < 3 {
			a.examples[kind] = append(a.examples[kind], fmt.Sprintf("%#x in %s:\n      got  %v\n      want %v", pc, insns[i].function, got[i], want[i]))
		}
	}
	return a
}

// llvmSymbolizer runs LLVM's llvm-symbolizer on pcs, if installed, and
// returns its frames for each in Frames' form; nil if not installed.
func llvmSymbolizer(t testing.TB, bin string, pcs []uint64) [][]Frame {
	t.Helper()
	if _, err := exec.LookPath("llvm-symbolizer"); err != nil {
		return nil
	}
	var in strings.Builder
	for _, pc := range pcs {
		fmt.Fprintf(&in, "%#x\n", pc)
	}
	cmd := exec.Command("llvm-symbolizer", "--obj="+bin, "--inlining", "--no-demangle", "--functions=linkage")
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Logf("llvm-symbolizer: %v", err)
		return nil
	}
	// Each address gets pairs of lines (function, file:line:column) and
	// an empty line.
	var result [][]Frame
	for _, group := range strings.Split(strings.TrimSpace(string(out)), "\n\n") {
		lines := strings.Split(group, "\n")
		var frames []Frame
		for i := 0; i+1 < len(lines); i += 2 {
			location := lines[i+1]
			if j := strings.LastIndexByte(location, ':'); j >= 0 {
				location = location[:j] // the column
			}
			frames = append(frames, parseAddr2lineFrame(lines[i], location))
		}
		if len(frames) == 1 && frames[0] == (Frame{}) {
			frames = nil
		}
		result = append(result, frames)
	}
	if len(result) != len(pcs) {
		t.Logf("llvm-symbolizer answered for %d addresses, want %d", len(result), len(pcs))
		return nil
	}
	return result
}

// unitFiles is what difference needs to know of the compilation unit that
// holds an address.
type unitFiles struct {
	compDir string
	files   []string        // the line table's, by file number
	aliases func() []string // all names of the ELF symbol holding the address
}

// unitFilesAt returns the compilation directory and line table files of
// the compilation unit holding pc.
func unitFilesAt(o *Object, pc uint64, symbolsByAddr func() map[uint64][]string) unitFiles {
	aliases := func() []string { return symbolAliases(o, pc, symbolsByAddr()) }
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dwarf == nil {
		return unitFiles{aliases: aliases}
	}
	i := o.dwarf.index.find(pc)
	if i < 0 || o.dwarf.units[i].lines == nil {
		return unitFiles{aliases: aliases}
	}
	u := o.dwarf.units[i]
	return unitFiles{compDir: u.compDir, files: u.lines.files, aliases: aliases}
}

// symbolAliases returns the demangled names of all function symbols at the
// start address of the symbol that holds pc.
func symbolAliases(o *Object, pc uint64, symbolsByAddr map[uint64][]string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if name, start := o.symbols.lookup(pc); name != "" {
		return symbolsByAddr[start]
	}
	return nil
}

// symbolNames maps the addresses of the symbols of o's files to their
// demangled names.
func symbolNames(o *Object) map[uint64][]string {
	names := map[uint64][]string{}
	for _, f := range o.files {
		for _, list := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
			syms, _ := list()
			for _, s := range syms {
				if elf.ST_TYPE(s.Info) != elf.STT_OBJECT {
					names[s.Value] = append(names[s.Value], demangleName(s.Name))
				}
			}
		}
	}
	return names
}

// difference names the first way got differs from want, or returns "".
//
// Some differences are not counted at all: where it knows no line,
// addr2line names the file of the nearest STT_FILE symbol ("crtstuff.c"),
// while Frames leaves File empty without debug info.
func difference(got, want []Frame, unit unitFiles) string {
	if len(got) != len(want) {
		return "number of frames"
	}
	for i := range got {
		g, w := got[i], want[i]
		switch {
		case g.Function != w.Function:
			// For a function without a linkage name (C, or C++ main),
			// binutils prefers the ELF symbol, which names the split-off
			// part (main.cold, f.part.0); DWARF names the source function.
			if i == len(got)-1 && strings.HasPrefix(w.Function, g.Function+".") {
				return explainedPrefix + "addr2line names the split-off part of a function by its ELF symbol"
			}
			// Several ELF symbols name the same code (glibc's aliases), and
			// binutils prefers them to DWARF's DW_AT_name.
			if i == len(got)-1 && slices.Contains(unit.aliases(), g.Function) && slices.Contains(unit.aliases(), w.Function) {
				return explainedPrefix + "addr2line picks another alias of the ELF symbol"
			}
			return "function"
		case g.Line != w.Line:
			return "line"
		case g.File != w.File && !(w.Line == 0 && g.File == ""):
			return fileDifference(g.File, w.File, unit)
		}
	}
	return ""
}

// fileDifference explains why got and want name different files.
func fileDifference(got, want string, unit unitFiles) string {
	var why []string
	// binutils 2.40 joins a relative compilation directory (glibc's
	// "./csu") to file names twice; gdb does it once, like Frames.
	if dir := path.Clean(unit.compDir) + "/"; !path.IsAbs(dir) && strings.HasPrefix(want, dir+dir) {
		want = strings.TrimPrefix(want, dir)
		why = append(why, "joins a relative compilation directory twice")
	}
	// binutils 2.40 takes DWARF 5's file 1 for the primary source file
	// (file 0), as file 1 was in DWARF 4; gdb and readelf agree with
	// Frames.
	if files := unit.files; want != got && len(files) > 1 && files[0] != "" && want == files[0] && got == files[1] {
		want = got
		why = append(why, "reads DWARF 5 file 1 as file 0")
	}
	if want != got {
		return "file"
	}
	return explainedPrefix + "addr2line " + strings.Join(why, " and ")
}

// TestAgainstAddr2line compares Frames with binutils' addr2line on every
// call site of the fixtures, built in many ways.
func TestAgainstAddr2line(t *testing.T) {
	type build struct {
		compiler string
		sources  []string
		flags    []string
	}
	var builds []build
	for _, src := range []string{"basic.c", "inline.c", "widget.cpp"} {
		for _, flags := range [][]string{
			{"-O0", "-g"},
			{"-O1", "-g"},
			{"-O2", "-g"},
			{"-O3", "-g"},
			{"-O2", "-gdwarf-4"},
			{"-O2", "-gdwarf-5", "-no-pie"},
			{"-O2", "-g", "-gz"},
			{"-O0"},
		} {
			builds = append(builds, build{"gcc", []string{src}, flags})
		}
		// clang writes no .debug_aranges, and DWARF 5 forms that gcc
		// uses only for split DWARF (strx, addrx, rnglistx).
		for _, flags := range [][]string{{"-O0", "-g"}, {"-O2", "-g"}, {"-O2", "-gdwarf-4"}} {
			builds = append(builds, build{"clang", []string{src}, flags})
		}
	}
	builds = append(builds,
		build{"gcc", []string{"shape.c"}, []string{"-O0", "-g", "-shared", "-fPIC"}},
		build{"gcc", []string{"shape.c"}, []string{"-O2", "-g", "-shared", "-fPIC"}},
		build{"gcc", []string{"shape.c", "shape_main.c"}, []string{"-O2", "-g", "-flto"}},
		build{"gcc", []string{"widget.cpp"}, []string{"-O2", "-g", "-flto"}},
	)
	var mu sync.Mutex
	totalCalls, totalAll := newAgreement(), newAgreement()
	t.Cleanup(func() {
		t.Logf("all builds, call sites: %v", totalCalls)
		t.Logf("all builds, all instructions: %v", totalAll)
	})
	for _, b := range builds {
		name := b.compiler + "/" + strings.Join(b.sources, "+") + "/" + strings.Join(b.flags, "")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bin := buildFixtureWith(t, b.compiler, b.sources, b.flags...)
			o, err := Options{DebugRoot: t.TempDir()}.Open(bin, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			insns := disassemble(t, bin)
			calls := compareWithAddr2line(t, o, bin, callSitesOf(insns))
			all := compareWithAddr2line(t, o, bin, insideFunctions(t, o, insns))
			t.Logf("call sites: %v", calls)
			t.Logf("all instructions: %v", all)
			mu.Lock()
			totalCalls.add(calls)
			totalAll.add(all)
			mu.Unlock()
			if calls.unexplainedRate() > 0 || all.unexplainedRate() > 0 {
				t.Errorf("unexplained differences with addr2line")
			}
		})
	}
}

// TestAgainstAddr2lineLibc compares Frames with addr2line on every call
// site of the system's C library, with its separate debug file
// (Debian's libc6-dbg) when installed.
func TestAgainstAddr2lineLibc(t *testing.T) {
	const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	o, err := Open(libc, nil)
	if err != nil {
		t.Skipf("no C library to compare with: %v", err)
	}
	defer o.Close()
	status, message := o.Status()
	t.Logf("%s: %v, %s", libc, status, message)
	if status != Full {
		t.Skip("no debug info for the C library (install libc6-dbg)")
	}
	insns := disassemble(t, libc)
	calls := compareWithAddr2line(t, o, libc, callSitesOf(insns))
	t.Logf("call sites: %v", calls)
	// Every 5th instruction, to keep the test short.
	var sample []instruction
	for i, in := range insideFunctions(t, o, insns) {
		if i%5 == 0 {
			sample = append(sample, in)
		}
	}
	all := compareWithAddr2line(t, o, libc, sample)
	t.Logf("all instructions, sampled: %v", all)
	if calls.unexplainedRate() > 0.001 || all.unexplainedRate() > 0.005 {
		t.Errorf("unexplained differences with addr2line")
	}
}

// TestDemanglerAgainstAddr2line compares the names of the C++ functions
// exported by libstdc++ (from .dynsym: it has no debug info here) with
// addr2line -C's, which uses binutils' demangler with the options gdb uses
// too (not c++filt's verbose ones).
func TestDemanglerAgainstAddr2line(t *testing.T) {
	const libstdcxx = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
	f, err := elf.Open(libstdcxx)
	if err != nil {
		t.Skip(err)
	}
	syms, _ := f.DynamicSymbols()
	f.Close()
	// Addresses with a single mangled name, so that both must pick it.
	names := map[uint64][]string{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF {
			names[s.Value] = append(names[s.Value], s.Name)
		}
	}
	var pcs []uint64
	for addr, n := range names {
		if len(n) == 1 && strings.HasPrefix(n[0], "_Z") {
			pcs = append(pcs, addr)
		}
	}
	slices.Sort(pcs)
	if len(pcs) < 1000 {
		t.Fatalf("only %d C++ functions in %s", len(pcs), libstdcxx)
	}

	o := open(t, libstdcxx, nil)
	var in strings.Builder
	for _, pc := range pcs {
		fmt.Fprintf(&in, "%#x\n", pc)
	}
	cmd := exec.Command("addr2line", "-f", "-C", "-e", libstdcxx)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("addr2line: %v", err)
	}
	lines := strings.Split(string(out), "\n")
	differ := 0
	for i, pc := range pcs {
		want := lines[2*i]
		got := ""
		if frames := o.Frames(pc); len(frames) > 0 {
			got = frames[0].Function
		}
		if got != want {
			if differ++; differ <= 5 {
				t.Logf("%s:\n\tgot  %s\n\twant %s", names[pc][0], got, want)
			}
		}
	}
	rate := 1 - float64(differ)/float64(len(pcs))
	t.Logf("%d of %d names agree with addr2line -C (%.2f%%)", len(pcs)-differ, len(pcs), 100*rate)
	if rate < 0.99 {
		t.Errorf("demangled names agree with addr2line on only %.2f%% of functions", 100*rate)
	}
}
