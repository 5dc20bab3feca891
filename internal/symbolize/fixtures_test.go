package symbolize

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Fixtures are compiled from testdata/ at test time, once per test binary
// run, into a directory that TestMain removes at the end.

var fixtureDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "symbolize-fixtures-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fixtureDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var fixtures struct {
	sync.Mutex
	built map[string]*fixtureResult
}

type fixtureResult struct {
	once sync.Once
	path string
	err  error
}

// buildFixture compiles the sources (paths relative to testdata/) with
// gcc, or g++ for C++ sources, and the given flags, and returns the
// output's path: named after the first source, libNAME.so with -shared.
// Identical requests share one build.
func buildFixture(t testing.TB, sources []string, flags ...string) string {
	t.Helper()
	return buildFixtureWith(t, "gcc", sources, flags...)
}

// buildFixtureWith is buildFixture with another compiler: "gcc" or
// "clang", or their C++ drivers for C++ sources.
func buildFixtureWith(t testing.TB, compiler string, sources []string, flags ...string) string {
	t.Helper()
	output := strings.TrimSuffix(sources[0], filepath.Ext(sources[0]))
	if slices.Contains(flags, "-shared") {
		output = "lib" + output + ".so"
	}
	for _, s := range sources {
		if strings.HasSuffix(s, ".cpp") {
			compiler = map[string]string{"gcc": "g++", "clang": "clang++"}[compiler]
			break
		}
	}
	if _, err := exec.LookPath(compiler); err != nil {
		t.Skipf("%s not installed: %v", compiler, err)
	}
	key := compiler + "\x00" + output + "\x00" + strings.Join(sources, "\x00") + "\x00" + strings.Join(flags, "\x00")
	sum := sha256.Sum256([]byte(key))
	dir := filepath.Join(fixtureDir, hex.EncodeToString(sum[:8]))

	fixtures.Lock()
	if fixtures.built == nil {
		fixtures.built = map[string]*fixtureResult{}
	}
	r := fixtures.built[key]
	if r == nil {
		r = &fixtureResult{}
		fixtures.built[key] = r
	}
	fixtures.Unlock()

	r.once.Do(func() {
		r.path = filepath.Join(dir, output)
		if r.err = os.MkdirAll(dir, 0o755); r.err != nil {
			return
		}
		args := append([]string{"-o", r.path}, flags...)
		for _, s := range sources {
			abs, err := filepath.Abs(filepath.Join("testdata", s))
			if err != nil {
				r.err = err
				return
			}
			args = append(args, abs)
		}
		r.err = run(dir, compiler, args...)
	})
	if r.err != nil {
		t.Fatalf("building %s: %v", output, r.err)
	}
	return r.path
}

// run runs a command in dir and returns its error with its output.
func run(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// markers returns the lines of the /* @name */ markers in a testdata
// source file.
func markers(t testing.TB, source string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", source))
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]int{}
	re := regexp.MustCompile(`/\* @(\S+) \*/`)
	for i, line := range strings.Split(string(data), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			lines[m[1]] = i + 1
		}
	}
	return lines
}

// testdataPath returns the absolute path of a testdata file, as DWARF
// records it.
func testdataPath(t testing.TB, name string) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// An instruction is one line of objdump's disassembly.
type instruction struct {
	addr     uint64
	function string // the symbol objdump puts it in
	call     bool
	callee   string // for calls, objdump's rendering of the target, e.g. "malloc@plt"
	// pc is what a stack walk hands the symbolizer for this instruction:
	// for a call, its return address minus 1; else its own address.
	pc uint64
}

var (
	objdumpFunction    = regexp.MustCompile(`^[0-9a-f]+ <(.*)>:$`)
	objdumpInstruction = regexp.MustCompile(`^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$`)
)

// disassemble returns the instructions of the executable sections of bin.
func disassemble(t testing.TB, bin string) []instruction {
	t.Helper()
	if _, err := exec.LookPath("objdump"); err != nil {
		t.Skipf("objdump not installed: %v", err)
	}
	cmd := exec.Command("objdump", "-d", "--no-show-raw-insn", "-w", bin)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var insns []instruction
	function := ""
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := objdumpFunction.FindStringSubmatch(line); m != nil {
			function = m[1]
			continue
		}
		m := objdumpInstruction.FindStringSubmatch(line)
		if m == nil || m[2] == "(bad)" {
			continue
		}
		addr, err := strconv.ParseUint(m[1], 16, 64)
		if err != nil {
			continue
		}
		if n := len(insns); n > 0 && insns[n-1].call {
			insns[n-1].pc = addr - 1 // the return address is the next instruction's
		}
		in := instruction{addr: addr, pc: addr, function: function, call: strings.HasPrefix(m[2], "call")}
		if in.call {
			if i := strings.IndexByte(m[3], '<'); i >= 0 {
				in.callee = strings.TrimSuffix(m[3][i+1:], ">")
			}
		}
		insns = append(insns, in)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("objdump -d %s: %v", bin, err)
	}
	return insns
}

// insideFunctions returns the instructions of insns that lie inside a sized
// function symbol of o's files (.symtab or .dynsym), leaving out the
// padding between functions, which no stack walk reports.
func insideFunctions(t testing.TB, o *Object, insns []instruction) []instruction {
	t.Helper()
	var funcs [][2]uint64
	for _, f := range o.files {
		for _, list := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
			syms, _ := list()
			for _, s := range syms {
				if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 && s.Section != elf.SHN_UNDEF {
					funcs = append(funcs, [2]uint64{s.Value, s.Value + s.Size})
				}
			}
		}
	}
	if len(funcs) == 0 {
		t.Fatalf("%s: no sized function symbols", o.path)
	}
	slices.SortFunc(funcs, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	var kept []instruction
	for _, in := range insns {
		i := sort.Search(len(funcs), func(i int) bool { return funcs[i][0] > in.addr }) - 1
		if i >= 0 && in.addr < funcs[i][1] {
			kept = append(kept, in)
		}
	}
	return kept
}

// callSitesOf returns the calls among insns.
func callSitesOf(insns []instruction) []instruction {
	var calls []instruction
	for _, in := range insns {
		if in.call {
			calls = append(calls, in)
		}
	}
	return calls
}

// addr2line runs binutils' addr2line on pcs and returns its frames for
// each, in Frames' form. Function names are demangled by this package's
// demangler rather than by addr2line's -C, so that differences between
// the demanglers (see TestDemanglerAgainstCxxfilt) do not hide or pose as
// differences in reading DWARF.
func addr2line(t testing.TB, bin string, pcs []uint64) [][]Frame {
	t.Helper()
	if _, err := exec.LookPath("addr2line"); err != nil {
		t.Skipf("addr2line not installed: %v", err)
	}
	var in bytes.Buffer
	for _, pc := range pcs {
		fmt.Fprintf(&in, "%#x\n", pc)
	}
	cmd := exec.Command("addr2line", "-a", "-i", "-f", "-e", bin)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("addr2line: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	result := make([][]Frame, 0, len(pcs))
	for i := 0; i < len(lines); {
		if !strings.HasPrefix(lines[i], "0x") {
			t.Fatalf("addr2line: unexpected line %q", lines[i])
		}
		i++
		var frames []Frame
		for i+1 < len(lines) && !strings.HasPrefix(lines[i], "0x") {
			frames = append(frames, parseAddr2lineFrame(lines[i], lines[i+1]))
			i += 2
		}
		if len(frames) == 1 && frames[0] == (Frame{}) {
			frames = nil
		}
		result = append(result, frames)
	}
	if len(result) != len(pcs) {
		t.Fatalf("addr2line answered for %d addresses, want %d", len(result), len(pcs))
	}
	return result
}

func parseAddr2lineFrame(function, location string) Frame {
	var f Frame
	if function != "??" {
		f.Function = demangleName(function)
	}
	if i := strings.Index(location, " (discriminator"); i >= 0 {
		location = location[:i]
	}
	if i := strings.LastIndexByte(location, ':'); i >= 0 {
		f.File = location[:i]
		f.Line, _ = strconv.Atoi(location[i+1:])
	}
	if f.File == "??" {
		f.File = ""
	} else if f.File != "" {
		f.File = path.Clean(f.File)
	}
	return f
}
