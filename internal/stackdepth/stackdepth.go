// Package stackdepth computes, without running a program, the most stack
// its code can use: each function's frame from the binary, the direct
// calls between functions from its machine code, and the deepest path
// through that call graph. It reads x86-64 ELF executables and shared
// objects, as package symbolize does, and says plainly what makes a bound
// incomplete: recursion, calls through pointers, calls into other
// libraries, and frames of a size known only at run time (alloca, VLAs).
//
// # How a bound is found
//
//  1. The functions are the FUNC symbols of .symtab (else .dynsym), each
//     with its address range. A gcc ".cold" part of a function is a piece
//     of that function, not a callee: it runs on its frame.
//  2. Each function's frame (the bytes it holds below its return address)
//     comes from its call-frame information in .eh_frame: the largest
//     offset of a CFA defined as the stack pointer plus an offset, less
//     the return address. Where the CFA is defined from the frame
//     pointer (code built with -O0 or -fno-omit-frame-pointer), the CFI
//     no longer says how far the stack pointer goes: the function's code
//     is then followed instruction by instruction from its entry (push,
//     pop, sub/add/and/lea/mov of the stack pointer, leave), with the CFI
//     rows as fixed points. Leaf functions may also write below the stack
//     pointer, in the 128-byte red zone the ABI grants them; that is
//     found from their memory operands and counted apart. gcc's
//     -fstack-usage files (.su), when given, replace the frame sizes
//     with the compiler's own: on x86-64 the .su number is the frame plus
//     the return address, which the tests check.
//  3. The same decoding finds the calls: CALL rel32 to a function, JMP to
//     another function (a tail call: the callee reuses the caller's
//     return address), calls to PLT stubs (functions of other
//     libraries, named from the stub's GOT slot), and calls and jumps
//     through a register or memory, whose callee is unknown.
//  4. Tarjan's algorithm splits the call graph into strongly connected
//     components; a component of more than one function, or a function
//     that calls itself, is a recursion. In callees-first order, each
//     function's worst case is its return address, its frame, and the
//     deepest of its callees' worst cases (a tail callee's stands in for
//     the whole); a recursion counts each member once and is marked
//     unbounded, as is everything that reaches it.
package stackdepth

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"

	"github.com/memtrail/memtrail/internal/symbolize"
)

// returnAddress is the size of a return address on x86-64.
const returnAddress = 8

// Source says where a function's frame size came from.
type Source string

const (
	// FromCFI: the CFA offsets of its .eh_frame FDE.
	FromCFI Source = "cfi"
	// FromCFIAndCode: its FDE defines the CFA from the frame pointer, so
	// the stack pointer's moves were followed in its code.
	FromCFIAndCode Source = "cfi+code"
	// FromCode: it has no FDE; its code alone was followed.
	FromCode Source = "code"
	// FromStackUsage: gcc's -fstack-usage file.
	FromStackUsage Source = "su"
)

// Function is one function of the binary and what is known of its stack.
type Function struct {
	Name       string // as the symbol table has it (mangled for C++)
	Demangled  string // the readable name
	Addr, Size uint64
	File       string // its source, from DWARF; "" if unknown
	Line       int

	// Frame is the bytes the function holds below its return address at
	// its deepest, as Source says. CFIFrame and CodeFrame are the two
	// measures of the binary (-1 when there is no FDE, or the code could
	// not be followed); StackUsage is the .su line's number (the frame
	// and return address), -1 if there is none.
	Frame      uint64
	Source     Source
	CFIFrame   int64
	CodeFrame  int64
	StackUsage int64
	// Dynamic says that the frame also grows by an amount known only at
	// run time (alloca, a VLA): Frame is its fixed part. Bounded says
	// that gcc found a bound for it, which Frame then includes.
	Dynamic, Bounded bool
	// RedZone is how many bytes below the stack pointer the function
	// writes at its deepest (a leaf's red zone).
	RedZone uint64

	Calls []Call

	// Fragment is the index of the function this one is a part of (a gcc
	// ".cold" part), or -1.
	Fragment int

	// Depth is the worst case of stack from this function's entry: its
	// return address, frame and red zone, and the deepest callee's, as
	// far as the call graph is known.
	Depth uint64
	// Recursive says that the function is part of a recursion (its
	// component is Cycle, an index in Analysis.Cycles, else -1);
	// Unbounded that it is or reaches one; Incomplete that an indirect
	// call, an external function or a dynamic frame can be reached,
	// whose stack is not counted.
	Recursive, Unbounded, Incomplete bool
	Cycle                            int

	next     int  // the callee on the deepest path, -1 if none
	nextTail bool // reached by a tail call
}

// CallKind says how a call site leaves the function.
type CallKind int

const (
	Direct   CallKind = iota // CALL to a function of the binary
	Tail                     // JMP to another function: a tail call
	External                 // CALL or JMP to a PLT stub or a GOT slot: a function of another library
	Indirect                 // CALL or JMP through a register or memory: unknown callee
)

func (k CallKind) String() string {
	switch k {
	case Direct:
		return "direct"
	case Tail:
		return "tail"
	case External:
		return "external"
	case Indirect:
		return "indirect"
	}
	return fmt.Sprintf("CallKind(%d)", int(k))
}

// Call is one call site.
type Call struct {
	Site   uint64 // the address of the instruction
	Kind   CallKind
	Callee int    // index in Analysis.Functions for Direct and Tail, else -1
	Name   string // the external function's name, for External ("" if unknown)
	Target uint64 // the address called, 0 for Indirect
}

// Analysis is the stack of every function of one binary.
type Analysis struct {
	Path      string
	Functions []*Function // by address
	// Cycles are the recursions: each the indices of the functions of one
	// strongly connected component, by address.
	Cycles [][]int
	// Notes say what was not read, for people: .su lines that matched
	// no function, instructions that could not be decoded.
	Notes []string

	byAddr map[uint64]int
	fdes   []fde
	decode *decoder
}

// Options say what to read besides the binary.
type Options struct {
	// StackUsage lists .su files or directories holding them. With none,
	// the .su files beside the sources the DWARF names are read, if any.
	StackUsage []string
	// NoLines leaves File and Line empty: DWARF is not read.
	NoLines bool
}

// ErrNotSupported wraps the reasons a file cannot be analyzed.
var ErrNotSupported = errors.New("not supported")

// Analyze reads the binary at path and computes its functions' stack.
func Analyze(path string, opts Options) (*Analysis, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file", path)
		}
		return nil, err
	}
	if !isELF(path) {
		return nil, fmt.Errorf("%s is not an ELF file: %w", path, ErrNotSupported)
	}
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s is a damaged ELF file: %w", path, err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("%s is a %s %s binary; only x86-64 is supported: %w", path, className(f.Class), f.Machine, ErrNotSupported)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return nil, fmt.Errorf("%s is an ELF %s, not an executable or shared object: %w", path, f.Type, ErrNotSupported)
	}
	a := &Analysis{Path: path, byAddr: map[uint64]int{}}
	if err := a.readFunctions(f); err != nil {
		return nil, err
	}
	if s := f.Section(".eh_frame"); s != nil && s.Type != elf.SHT_NOBITS {
		data, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("reading .eh_frame: %w", err)
		}
		if a.fdes, err = parseEHFrame(data, s.Addr); err != nil {
			return nil, fmt.Errorf("reading .eh_frame: %w", err)
		}
	}
	a.decode, err = newDecoder(f)
	if err != nil {
		return nil, err
	}
	a.addUnnamedFunctions()
	for i := range a.Functions {
		a.analyzeCode(i)
	}
	a.mergeFragments()
	if !opts.NoLines {
		a.readLines(path)
	}
	if err := a.readStackUsage(f, opts.StackUsage); err != nil {
		return nil, err
	}
	a.computeDepths()
	return a, nil
}

// isELF reports whether the file at path begins with the ELF magic.
func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, len(elf.ELFMAG))
	if _, err := io.ReadFull(f, magic); err != nil {
		return false
	}
	return string(magic) == elf.ELFMAG
}

func className(c elf.Class) string {
	switch c {
	case elf.ELFCLASS32:
		return "32-bit"
	case elf.ELFCLASS64:
		return "64-bit"
	}
	return c.String()
}

// Lookup returns the function named name (raw or demangled), or nil.
func (a *Analysis) Lookup(name string) *Function {
	for _, fn := range a.Functions {
		if fn.Name == name || fn.Demangled == name {
			return fn
		}
	}
	return nil
}

// index returns the index of fn in a.Functions.
func (a *Analysis) index(fn *Function) int {
	return a.byAddr[fn.Addr]
}

// readLines fills in each function's source file and line from the
// DWARF of the binary, if it has any.
func (a *Analysis) readLines(path string) {
	obj, err := symbolize.Options{CacheDir: "-"}.Open(path, nil)
	if err != nil {
		return
	}
	defer obj.Close()
	if st, _ := obj.Status(); st != symbolize.Full {
		return
	}
	for _, fn := range a.Functions {
		frames := obj.Frames(fn.Addr)
		if len(frames) == 0 {
			continue
		}
		outer := frames[len(frames)-1]
		fn.File, fn.Line = outer.File, outer.Line
	}
}

// sourceFiles returns the distinct source files of the functions.
func (a *Analysis) sourceFiles() []string {
	var files []string
	for _, fn := range a.Functions {
		if fn.File != "" {
			files = append(files, fn.File)
		}
	}
	slices.Sort(files)
	return slices.Compact(files)
}
