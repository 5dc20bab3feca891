package symbolize

import (
	"debug/elf"
	"slices"
	"strings"
)

// symbolTable maps addresses to the names of the ELF function symbols that
// contain them. It is what remains of a program without debug info.
type symbolTable struct {
	index  spanIndex
	names  []string // raw (mangled) names, indexed by span id
	starts []uint64 // addresses, indexed by span id
}

// A symbol is one candidate function symbol read from .symtab or .dynsym.
type symbol struct {
	name       string
	addr, size uint64
	rank       int // lower is preferred among symbols at the same address
}

// A symbolSource is a symbol table and the section headers its symbols
// refer to.
type symbolSource struct {
	sections []*elf.Section
	symbols  []elf.Symbol
}

// newSymbolTable indexes the function symbols of the given tables. It
// returns nil if there are none.
//
// Symbols are chosen and sized this way:
//  1. Keep defined FUNC and IFUNC symbols, and NOTYPE symbols in executable
//     sections (hand-written assembly often leaves the type out).
//  2. Among symbols at the same address, keep one: global before weak
//     before local, typed before untyped, sized before unsized, fewer
//     leading underscores (malloc rather than __libc_malloc), then the
//     name's order, so that the choice does not depend on table order.
//  3. A sized symbol covers [addr, addr+size). An unsized one covers up to
//     the next symbol or the end of its section.
func newSymbolTable(tables []symbolSource) *symbolTable {
	var syms []symbol
	sectionEnd := map[uint64]uint64{} // address of an unsized symbol -> end of its section
	for _, table := range tables {
		for _, s := range table.symbols {
			sym, ok := functionSymbol(table.sections, s)
			if !ok {
				continue
			}
			syms = append(syms, sym)
			if s.Size == 0 {
				sec := table.sections[s.Section]
				sectionEnd[s.Value] = max(sectionEnd[s.Value], sec.Addr+sec.Size)
			}
		}
	}
	if len(syms) == 0 {
		return nil
	}
	slices.SortFunc(syms, func(a, b symbol) int {
		if a.addr != b.addr {
			if a.addr < b.addr {
				return -1
			}
			return 1
		}
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		return strings.Compare(a.name, b.name)
	})
	syms = slices.CompactFunc(syms, func(a, b symbol) bool { return a.addr == b.addr })

	t := &symbolTable{names: make([]string, len(syms)), starts: make([]uint64, len(syms))}
	spans := make([]span, len(syms))
	for i, s := range syms {
		end := s.addr + s.size
		if s.size == 0 {
			end = sectionEnd[s.addr]
			if i+1 < len(syms) && syms[i+1].addr < end {
				end = syms[i+1].addr
			}
		}
		t.names[i] = s.name
		t.starts[i] = s.addr
		spans[i] = span{lo: s.addr, hi: end, id: int32(i)}
	}
	t.index = newSpanIndex(spans)
	return t
}

// functionSymbol reports whether s names code, and ranks it.
func functionSymbol(sections []*elf.Section, s elf.Symbol) (symbol, bool) {
	if s.Name == "" || s.Section == elf.SHN_UNDEF || s.Section >= elf.SHN_LORESERVE || int(s.Section) >= len(sections) {
		return symbol{}, false
	}
	rank := 0
	switch elf.ST_TYPE(s.Info) {
	case elf.STT_FUNC, elf.STT_GNU_IFUNC:
	case elf.STT_NOTYPE:
		if sections[s.Section].Flags&elf.SHF_EXECINSTR == 0 || strings.HasPrefix(s.Name, ".L") || strings.HasPrefix(s.Name, "$") {
			return symbol{}, false
		}
		rank += 8
	default:
		return symbol{}, false
	}
	switch elf.ST_BIND(s.Info) {
	case elf.STB_GLOBAL:
	case elf.STB_WEAK:
		rank += 16
	default:
		rank += 32
	}
	if s.Size == 0 {
		rank += 4
	}
	rank += min(3, len(s.Name)-len(strings.TrimLeft(s.Name, "_")))
	return symbol{name: s.Name, addr: s.Value, size: s.Size, rank: rank}, true
}

// lookup returns the raw name and the address of the symbol holding addr,
// or "", 0.
func (t *symbolTable) lookup(addr uint64) (name string, start uint64) {
	if t == nil {
		return "", 0
	}
	if i := t.index.find(addr); i >= 0 {
		return t.names[i], t.starts[i]
	}
	return "", 0
}

func (t *symbolTable) len() int {
	if t == nil {
		return 0
	}
	return len(t.names)
}
