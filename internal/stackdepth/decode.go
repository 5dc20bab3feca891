package stackdepth

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"strings"

	"golang.org/x/arch/x86/x86asm"
)

// decoder reads the machine code of a binary by address, and knows its PLT
// stubs and GOT slots.
type decoder struct {
	code []codeSection
	plt  []codeSection // .plt, .plt.sec, .plt.got
	// slots names the function each GOT slot the dynamic loader fills
	// holds (from R_X86_64_JUMP_SLOT and R_X86_64_GLOB_DAT relocations).
	slots map[uint64]string
}

type codeSection struct {
	name string
	addr uint64
	data []byte
}

func (s codeSection) holds(addr uint64) bool {
	return addr >= s.addr && addr-s.addr < uint64(len(s.data))
}

func newDecoder(f *elf.File) (*decoder, error) {
	d := &decoder{slots: map[uint64]string{}}
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_EXECINSTR == 0 || s.Type != elf.SHT_PROGBITS {
			continue
		}
		data, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", s.Name, err)
		}
		cs := codeSection{name: s.Name, addr: s.Addr, data: data}
		d.code = append(d.code, cs)
		if strings.HasPrefix(s.Name, ".plt") {
			d.plt = append(d.plt, cs)
		}
	}
	dynsyms, _ := f.DynamicSymbols()
	for _, s := range f.Sections {
		if s.Type != elf.SHT_RELA || s.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		data, err := s.Data()
		if err != nil {
			continue
		}
		const relaSize = 24
		for off := 0; off+relaSize <= len(data); off += relaSize {
			slot := binary.LittleEndian.Uint64(data[off:])
			info := binary.LittleEndian.Uint64(data[off+8:])
			typ, sym := elf.R_X86_64(info&0xffffffff), int(info>>32)
			if (typ != elf.R_X86_64_JMP_SLOT && typ != elf.R_X86_64_GLOB_DAT) || sym == 0 || sym > len(dynsyms) {
				continue
			}
			d.slots[slot] = dynsyms[sym-1].Name
		}
	}
	return d, nil
}

// bytes returns the code from addr to end, or nil if addr is not in code.
func (d *decoder) bytes(addr, end uint64) []byte {
	for _, s := range d.code {
		if s.holds(addr) {
			stop := min(end-s.addr, uint64(len(s.data)))
			return s.data[addr-s.addr : stop]
		}
	}
	return nil
}

// inPLT reports whether addr is in a PLT section.
func (d *decoder) inPLT(addr uint64) bool {
	for _, s := range d.plt {
		if s.holds(addr) {
			return true
		}
	}
	return false
}

// pltName returns the name of the function the PLT stub at addr jumps to:
// the stub's first jump through a GOT slot names it. "" if it is not
// known.
func (d *decoder) pltName(addr uint64) string {
	code := d.bytes(addr, addr+32)
	pc := addr
	for range 4 {
		inst, err := x86asm.Decode(code, 64)
		if err != nil {
			return ""
		}
		if inst.Op == x86asm.JMP {
			if slot, ok := ripTarget(inst, pc); ok {
				return d.slots[slot]
			}
			return ""
		}
		code, pc = code[inst.Len:], pc+uint64(inst.Len)
	}
	return ""
}

// ripTarget returns the address of inst's rip-relative memory operand, if
// it has one.
func ripTarget(inst x86asm.Inst, pc uint64) (uint64, bool) {
	for _, arg := range inst.Args {
		if m, ok := arg.(x86asm.Mem); ok && m.Base == x86asm.RIP {
			return pc + uint64(inst.Len) + uint64(m.Disp), true
		}
	}
	return 0, false
}
