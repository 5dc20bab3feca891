package stackdepth

import (
	"debug/elf"
	"fmt"
	"slices"
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// readFunctions lists the functions of f: the defined FUNC and IFUNC
// symbols of .symtab, or of .dynsym when there is no .symtab, in
// executable sections. Of several symbols at one address the global one
// is kept (then the one whose name sorts first). A symbol of size 0 ends
// at the next one or at its section's end. A binary with none is an
// error: it was stripped.
func (a *Analysis) readFunctions(f *elf.File) error {
	syms, err := f.Symbols()
	if err != nil || !hasFunctions(f, syms) {
		syms, _ = f.DynamicSymbols()
	}
	type candidate struct {
		elf.Symbol
		sectionEnd uint64
		rank       int
	}
	var cands []candidate
	for _, s := range syms {
		typ := elf.ST_TYPE(s.Info)
		if (typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC) || s.Name == "" || !inCode(f, s) {
			continue
		}
		sec := f.Sections[s.Section]
		rank := 0
		switch elf.ST_BIND(s.Info) {
		case elf.STB_GLOBAL:
		case elf.STB_WEAK:
			rank = 1
		default:
			rank = 2
		}
		cands = append(cands, candidate{Symbol: s, sectionEnd: sec.Addr + sec.Size, rank: rank})
	}
	if len(cands) == 0 {
		return fmt.Errorf("%s has no function symbols (stripped?): nothing to analyze: %w", a.Path, ErrNotSupported)
	}
	slices.SortFunc(cands, func(x, y candidate) int {
		switch {
		case x.Value != y.Value:
			return cmpUint(x.Value, y.Value)
		case x.rank != y.rank:
			return x.rank - y.rank
		}
		return strings.Compare(x.Name, y.Name)
	})
	cands = slices.CompactFunc(cands, func(x, y candidate) bool { return x.Value == y.Value })
	for i, c := range cands {
		size := c.Size
		if size == 0 {
			end := c.sectionEnd
			if i+1 < len(cands) && cands[i+1].Value < end {
				end = cands[i+1].Value
			}
			size = end - c.Value
		}
		fn := &Function{
			Name: c.Name, Demangled: demangle.Filter(c.Name), Addr: c.Value, Size: size,
			CFIFrame: -1, CodeFrame: -1, StackUsage: -1, Fragment: -1, Cycle: -1, next: -1,
		}
		a.byAddr[fn.Addr] = len(a.Functions)
		a.Functions = append(a.Functions, fn)
	}
	return nil
}

// addUnnamedFunctions makes a function of each FDE whose code no symbol
// covers, named sub_ADDRESS: the static functions of a binary stripped to
// its .dynsym. Then it indexes the functions and links the fragments.
func (a *Analysis) addUnnamedFunctions() {
	var unnamed []*Function
	for _, f := range a.fdes {
		if a.functionAt(f.begin) >= 0 || a.decode.inPLT(f.begin) {
			continue
		}
		name := fmt.Sprintf("sub_%x", f.begin)
		fn := &Function{
			Name: name, Demangled: name, Addr: f.begin, Size: f.end - f.begin,
			CFIFrame: -1, CodeFrame: -1, StackUsage: -1, Fragment: -1, Cycle: -1, next: -1,
		}
		if rule := f.rows[0].rule; rule.expr || rule.reg != dwarfRSP || rule.offset != returnAddress {
			// Code entered with more than a return address on the stack
			// is a part of a function (a ".cold" part whose name was
			// stripped): the function that jumps to it owns it.
			fn.Fragment = fragmentOfUnknown
		}
		unnamed = append(unnamed, fn)
	}
	a.Functions = append(a.Functions, unnamed...)
	slices.SortStableFunc(a.Functions, func(x, y *Function) int { return cmpUint(x.Addr, y.Addr) })
	for i, fn := range a.Functions {
		a.byAddr[fn.Addr] = i
	}
	a.linkFragments()
}

// IsFragment reports whether fn is a part of another function.
func (fn *Function) IsFragment() bool { return fn.Fragment != -1 }

// hasFunctions reports whether syms holds a defined function.
func hasFunctions(f *elf.File, syms []elf.Symbol) bool {
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && inCode(f, s) {
			return true
		}
	}
	return false
}

// inCode reports whether s is defined in an executable section of f.
func inCode(f *elf.File, s elf.Symbol) bool {
	if s.Section == elf.SHN_UNDEF || s.Section >= elf.SHN_LORESERVE || int(s.Section) >= len(f.Sections) {
		return false
	}
	return f.Sections[s.Section].Flags&elf.SHF_EXECINSTR != 0
}

// linkFragments makes each gcc ".cold" part (foo.cold, foo.cold.1) a
// fragment of the function it was split from, when that function is
// there.
func (a *Analysis) linkFragments() {
	byName := map[string]int{}
	for i, fn := range a.Functions {
		if _, dup := byName[fn.Name]; !dup {
			byName[fn.Name] = i
		}
	}
	for _, fn := range a.Functions {
		if fn.IsFragment() {
			continue
		}
		at := strings.Index(fn.Name, ".cold")
		if at <= 0 {
			continue
		}
		if parent, ok := byName[fn.Name[:at]]; ok {
			fn.Fragment = parent
		}
	}
}

// fragmentOfUnknown is the Fragment of a function part whose function is
// not known yet: the first function found jumping to it owns it.
const fragmentOfUnknown = -2

// owner returns the index of the function whose code fn runs on: its own
// or, for a fragment, the parent's.
func (a *Analysis) owner(i int) int {
	if p := a.Functions[i].Fragment; p >= 0 {
		return p
	}
	return i
}

// functionAt returns the index of the function whose range holds addr,
// or -1.
func (a *Analysis) functionAt(addr uint64) int {
	i, found := slices.BinarySearchFunc(a.Functions, addr, func(fn *Function, x uint64) int { return cmpUint(fn.Addr, x) })
	if found {
		return i
	}
	if i == 0 {
		return -1
	}
	if fn := a.Functions[i-1]; addr < fn.Addr+fn.Size {
		return i - 1
	}
	return -1
}

// fdeAt returns the FDE whose range holds addr, or nil.
func (a *Analysis) fdeAt(addr uint64) *fde {
	i, found := slices.BinarySearchFunc(a.fdes, addr, func(f fde, x uint64) int { return cmpUint(f.begin, x) })
	if found {
		return &a.fdes[i]
	}
	if i == 0 {
		return nil
	}
	if f := &a.fdes[i-1]; addr < f.end {
		return f
	}
	return nil
}

func cmpUint(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
