package stackdepth

import (
	"bytes"
	"fmt"

	"golang.org/x/arch/x86/x86asm"
)

// endbr64 marks where indirect branches may land, under
// -fcf-protection.
var endbr64 = []byte{0xf3, 0x0f, 0x1e, 0xfa}

// stackState is what is known of the stack at an instruction, as
// distances below the CFA (the stack pointer before the call that entered
// the function, so the return address is at CFA-8): depth is CFA minus
// the stack pointer, fp CFA minus the frame pointer (rbp).
type stackState struct {
	depth, fp           int64
	depthKnown, fpKnown bool
}

// instruction is one decoded instruction of a function.
type instruction struct {
	addr uint64
	inst x86asm.Inst
}

// codeWalk follows one function's code: the deepest the stack pointer
// goes, the deepest byte written below it, and the calls.
type codeWalk struct {
	a       *Analysis
	fn      int // the function walked
	owner   int // the function whose frame it runs on
	fde     *fde
	insts   []instruction
	at      map[uint64]int // address -> index in insts
	states  []stackState   // the state before each instruction, once visited
	visited []bool

	deepest, deepestTouch int64
	followed              bool // some state was known
	dynamic               bool
	undecoded             int // bytes that are no instruction
	calls                 []Call
}

// analyzeCode follows the code of function i (see the package comment,
// step 2) and records its frame measures, red zone and calls.
//
//  1. Decode the function's bytes from start to end.
//  2. From the entry (the stack pointer 8 below the CFA; a ".cold"
//     fragment starts where its FDE says), follow the flow: fall through,
//     conditional and unconditional jumps inside the function; stop at
//     returns, tail calls and jumps through tables. Each instruction is
//     visited once, with the state it is first reached in, corrected by
//     the CFI row in force there when that row says where the stack
//     pointer is.
//  3. Instructions the flow did not reach (the cases of a jump table)
//     are taken in address order, each from the state the one before it
//     left.
func (a *Analysis) analyzeCode(i int) {
	fn := a.Functions[i]
	if f := a.fdeAt(fn.Addr); f != nil && f.begin == fn.Addr {
		fn.CFIFrame = f.maxStackOffset() - returnAddress
	}
	w := a.walk(i)
	if w == nil {
		return
	}
	if w.undecoded > 0 {
		a.Notes = append(a.Notes, fmt.Sprintf("%s: %d bytes could not be decoded", fn.Name, w.undecoded))
	}
	if w.followed {
		fn.CodeFrame = max(w.deepest-returnAddress, 0)
		fn.RedZone = uint64(max(w.deepestTouch-w.deepest, 0))
	}
	fn.Dynamic = w.dynamic
	fn.Calls = w.calls
	switch {
	case fn.CFIFrame >= 0 && fn.CodeFrame > fn.CFIFrame:
		fn.Frame, fn.Source = uint64(fn.CodeFrame), FromCFIAndCode
	case fn.CFIFrame >= 0:
		fn.Frame, fn.Source = uint64(fn.CFIFrame), FromCFI
	case fn.CodeFrame >= 0:
		fn.Frame, fn.Source = uint64(fn.CodeFrame), FromCode
	}
}

// walk decodes function i and follows its code; nil if it has none.
func (a *Analysis) walk(i int) *codeWalk {
	fn := a.Functions[i]
	w := &codeWalk{a: a, fn: i, owner: a.owner(i), at: map[uint64]int{}}
	if f := a.fdeAt(fn.Addr); f != nil && f.begin == fn.Addr {
		w.fde = f
	}
	code := a.decode.bytes(fn.Addr, fn.Addr+fn.Size)
	for pc, rest := fn.Addr, code; len(rest) > 0; {
		if bytes.HasPrefix(rest, endbr64) {
			// x86asm decodes only its first two bytes; it is a no-op here.
			inst := x86asm.Inst{Op: x86asm.NOP, Len: len(endbr64), Mode: 64}
			w.at[pc] = len(w.insts)
			w.insts = append(w.insts, instruction{pc, inst})
			pc, rest = pc+uint64(inst.Len), rest[inst.Len:]
			continue
		}
		inst, err := x86asm.Decode(rest, 64)
		if err != nil {
			w.undecoded++
			pc, rest = pc+1, rest[1:]
			continue
		}
		w.at[pc] = len(w.insts)
		w.insts = append(w.insts, instruction{pc, inst})
		pc, rest = pc+uint64(inst.Len), rest[inst.Len:]
	}
	if len(w.insts) == 0 {
		return nil
	}
	w.states = make([]stackState, len(w.insts))
	w.visited = make([]bool, len(w.insts))
	entry := stackState{depth: returnAddress, depthKnown: true}
	if fn.IsFragment() {
		entry = stackState{}
	}
	w.flow(entry)
	w.fill()
	return w
}

// flow visits the instructions reachable from the entry.
func (w *codeWalk) flow(entry stackState) {
	work := []int{0}
	w.states[0], w.visited[0] = entry, true
	for len(work) > 0 {
		i := work[len(work)-1]
		work = work[:len(work)-1]
		post, next := w.step(i, w.states[i])
		for _, j := range next {
			if !w.visited[j] {
				w.visited[j], w.states[j] = true, post
				work = append(work, j)
			}
		}
	}
}

// fill takes the instructions flow did not reach, in address order.
func (w *codeWalk) fill() {
	var carry stackState
	for i := range w.insts {
		if w.visited[i] {
			carry = w.states[i]
			if post, next := w.step(i, carry); len(next) > 0 {
				carry = post
			}
			continue
		}
		w.visited[i], w.states[i] = true, carry
		if post, next := w.step(i, carry); len(next) > 0 {
			carry = post
		}
	}
	// step appended each visited instruction's calls twice at most: once
	// in flow, once here; keep the first of each site.
	seen := map[uint64]bool{}
	calls := w.calls[:0]
	for _, c := range w.calls {
		if !seen[c.Site] {
			seen[c.Site] = true
			calls = append(calls, c)
		}
	}
	w.calls = calls
}

// step applies instruction i to the state before it and returns the state
// after it and the instructions that may run next (none after a return or
// a jump out).
func (w *codeWalk) step(i int, s stackState) (stackState, []int) {
	in := w.insts[i]
	inst, pc := in.inst, in.addr
	if w.fde != nil && pc < w.fde.end {
		if rule := w.fde.rowAt(pc); !rule.expr {
			switch rule.reg {
			case dwarfRSP:
				s.depth, s.depthKnown = rule.offset, true
			case dwarfRBP:
				s.fp, s.fpKnown = rule.offset, true
			}
		}
	} else if w.fde == nil && w.a.Functions[w.fn].IsFragment() {
		if f := w.a.fdeAt(pc); f != nil {
			if rule := f.rowAt(pc); !rule.expr && rule.reg == dwarfRSP {
				s.depth, s.depthKnown = rule.offset, true
			}
		}
	}
	w.states[i] = s
	w.note(s)
	w.touches(inst, s)

	next := pc + uint64(inst.Len)
	fallthrough_ := func() []int {
		if j, ok := w.at[next]; ok {
			return []int{j}
		}
		return nil
	}
	dst, _ := inst.Args[0].(x86asm.Reg)
	switch inst.Op {
	case x86asm.PUSH, x86asm.PUSHFQ:
		s.depth += 8
	case x86asm.POP, x86asm.POPFQ:
		s.depth -= 8
		if isFP(dst) {
			s.fpKnown = false
		}
		if isSP(dst) {
			s.depthKnown = false
		}
	case x86asm.LEAVE:
		s.depth, s.depthKnown = s.fp-8, s.fpKnown
		s.fpKnown = false
	case x86asm.RET, x86asm.UD2, x86asm.HLT:
		w.note(s)
		return s, nil
	case x86asm.CALL:
		w.call(inst, pc, s, false)
		w.note(s)
		return s, fallthrough_()
	case x86asm.JMP:
		w.note(s)
		if j, ok := w.jumpInside(inst, pc); ok {
			return s, j
		}
		w.call(inst, pc, s, true)
		return s, nil
	default:
		if isConditionalJump(inst.Op) {
			succ := fallthrough_()
			if j, ok := w.jumpInside(inst, pc); ok {
				succ = append(succ, j...)
			} else {
				w.call(inst, pc, s, true)
			}
			w.note(s)
			return s, succ
		}
		switch {
		case isSP(dst):
			s = w.setSP(inst, s)
		case isFP(dst):
			s = w.setFP(inst, s)
		}
	}
	w.note(s)
	return s, fallthrough_()
}

// note counts a state in the deepest the stack pointer went.
func (w *codeWalk) note(s stackState) {
	if s.depthKnown {
		w.followed = true
		w.deepest = max(w.deepest, s.depth)
	}
}

// touches notes the deepest byte inst reads, writes or takes the address
// of relative to the stack or frame pointer.
func (w *codeWalk) touches(inst x86asm.Inst, s stackState) {
	for _, arg := range inst.Args {
		m, ok := arg.(x86asm.Mem)
		if !ok {
			continue
		}
		switch {
		case isSP(m.Base) && s.depthKnown:
			w.deepestTouch = max(w.deepestTouch, s.depth-m.Disp)
		case isFP(m.Base) && s.fpKnown:
			w.deepestTouch = max(w.deepestTouch, s.fp-m.Disp)
		}
	}
}

// setSP applies an instruction that writes the stack pointer.
func (w *codeWalk) setSP(inst x86asm.Inst, s stackState) stackState {
	imm, isImm := inst.Args[1].(x86asm.Imm)
	src, _ := inst.Args[1].(x86asm.Reg)
	mem, isMem := inst.Args[1].(x86asm.Mem)
	switch {
	case inst.Op == x86asm.SUB && isImm:
		s.depth += int64(imm)
	case inst.Op == x86asm.ADD && isImm:
		s.depth -= int64(imm)
	case inst.Op == x86asm.SUB:
		// alloca, a VLA: the frame grows by a size known at run time.
		w.dynamic = true
		s.depthKnown = false
	case inst.Op == x86asm.AND && isImm && imm < 0:
		// Realignment: the stack pointer, a multiple of 8, goes down by
		// at most the alignment less 8.
		s.depth += -int64(imm) - 8
	case inst.Op == x86asm.LEA && isMem && isSP(mem.Base) && mem.Index == 0:
		s.depth -= mem.Disp
	case inst.Op == x86asm.LEA && isMem && isFP(mem.Base) && mem.Index == 0:
		s.depth, s.depthKnown = s.fp-mem.Disp, s.fpKnown
	case inst.Op == x86asm.MOV && isFP(src):
		s.depth, s.depthKnown = s.fp, s.fpKnown
	case inst.Op == x86asm.CMP || inst.Op == x86asm.TEST:
	default:
		s.depthKnown = false
	}
	return s
}

// setFP applies an instruction that writes the frame pointer.
func (w *codeWalk) setFP(inst x86asm.Inst, s stackState) stackState {
	src, _ := inst.Args[1].(x86asm.Reg)
	mem, isMem := inst.Args[1].(x86asm.Mem)
	switch {
	case inst.Op == x86asm.MOV && isSP(src):
		s.fp, s.fpKnown = s.depth, s.depthKnown
	case inst.Op == x86asm.LEA && isMem && isSP(mem.Base) && mem.Index == 0:
		s.fp, s.fpKnown = s.depth-mem.Disp, s.depthKnown
	case inst.Op == x86asm.CMP || inst.Op == x86asm.TEST || inst.Op == x86asm.BT:
	default:
		s.fpKnown = false
	}
	return s
}

// jumpInside returns the instruction a direct jump goes to, if it is in
// the function being walked.
func (w *codeWalk) jumpInside(inst x86asm.Inst, pc uint64) ([]int, bool) {
	rel, ok := inst.Args[0].(x86asm.Rel)
	if !ok {
		return nil, false
	}
	target := pc + uint64(inst.Len) + uint64(int64(rel))
	if j, ok := w.at[target]; ok {
		return []int{j}, true
	}
	return nil, false
}

// call records a call, or a jump out of the function (tail is true).
func (w *codeWalk) call(inst x86asm.Inst, pc uint64, s stackState, tail bool) {
	a := w.a
	c := Call{Site: pc, Callee: -1}
	switch arg := inst.Args[0].(type) {
	case x86asm.Rel:
		c.Target = pc + uint64(inst.Len) + uint64(int64(arg))
		callee := a.functionAt(c.Target)
		switch {
		case a.decode.inPLT(c.Target):
			c.Kind, c.Name = External, a.decode.pltName(c.Target)
		case callee >= 0 && a.Functions[callee].Fragment == fragmentOfUnknown && tail:
			a.Functions[callee].Fragment = w.owner
			return // a jump to a part of this function
		case callee >= 0 && a.owner(callee) == w.owner && (tail || c.Target != a.Functions[callee].Addr):
			return // a jump between a function and its .cold part
		case callee >= 0 && tail && c.Target != a.Functions[callee].Addr:
			// A jump into the middle of another function is no call: a
			// part jumping back into its function (whose name, if it
			// had one, was stripped), on that function's stack.
			return
		case callee >= 0:
			c.Kind, c.Callee = Direct, callee
			if tail {
				c.Kind = Tail
			}
		default:
			c.Kind = External // code outside every function: its stack is not known
		}
	case x86asm.Mem:
		if slot, ok := ripTarget(inst, pc); ok {
			if name, ok := a.decode.slots[slot]; ok {
				c.Kind, c.Name = External, name
				break
			}
		}
		if tail && jumpTable(inst, s) {
			return
		}
		c.Kind = Indirect
	case x86asm.Reg:
		if tail && jumpTable(inst, s) {
			return
		}
		c.Kind = Indirect
	default:
		return
	}
	w.calls = append(w.calls, c)
}

// jumpTable reports whether an indirect jump is a switch's, inside the
// function, rather than a tail call through a pointer: the function still
// holds a frame (a tail call leaves only the return address), or the
// jump is marked notrack (gcc's jump tables under -fcf-protection).
func jumpTable(inst x86asm.Inst, s stackState) bool {
	if s.depthKnown && s.depth > returnAddress {
		return true
	}
	for _, p := range inst.Prefix {
		if p&0xff == 0x3e {
			return true
		}
	}
	return false
}

func isSP(r x86asm.Reg) bool { return r == x86asm.RSP || r == x86asm.ESP || r == x86asm.SP }
func isFP(r x86asm.Reg) bool { return r == x86asm.RBP || r == x86asm.EBP || r == x86asm.BP }

func isConditionalJump(op x86asm.Op) bool {
	switch op {
	case x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JE, x86asm.JG, x86asm.JGE, x86asm.JL, x86asm.JLE,
		x86asm.JNE, x86asm.JNO, x86asm.JNP, x86asm.JNS, x86asm.JO, x86asm.JP, x86asm.JS,
		x86asm.JCXZ, x86asm.JECXZ, x86asm.JRCXZ, x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE:
		return true
	}
	return false
}
