package trace

import "encoding/binary"

// recordState is what StackNode and Symbol records are coded against: the
// previous record of each of those kinds in the block. Stack nodes come in
// chains, each node the child of the one before with the next id, and
// symbols come sorted by object and offset, so coded as differences from
// the record before most of their fields take a byte or less. The state
// starts afresh in every block, like the event state, so that every block
// decodes alone.
type recordState struct {
	nodeID, nodeModule   uint64 // of the previous StackNode
	symObject, symOffset uint64 // of the previous Symbol
	function, file, line uint64 // of the previous frame of a Symbol
}

// appendStackNode appends the fields of a StackNode record of n to b and
// moves the state on to n.
func (s *recordState) appendStackNode(b []byte, n *StackNode) []byte {
	b = binary.AppendUvarint(b, n.Process)
	b = binary.AppendUvarint(b, zigzag(int64(n.ID-(s.nodeID+1))))
	b = binary.AppendUvarint(b, n.ID-n.Parent)
	b = binary.AppendUvarint(b, zigzag(int64(n.Module-s.nodeModule)))
	b = binary.AppendUvarint(b, n.Offset)
	s.nodeID, s.nodeModule = n.ID, n.Module
	return b
}

// stackNode decodes the fields of a StackNode record, as appendStackNode
// wrote them.
func (s *recordState) stackNode(d *decoder) *StackNode {
	n := &StackNode{Process: d.uv()}
	n.ID = s.nodeID + 1 + unzigzag(d.uv())
	n.Parent = n.ID - d.uv()
	n.Module = s.nodeModule + unzigzag(d.uv())
	n.Offset = d.uv()
	s.nodeID, s.nodeModule = n.ID, n.Module
	return n
}

// appendSymbol appends the fields of a Symbol record of sym to b and moves
// the state on to sym.
func (s *recordState) appendSymbol(b []byte, sym *Symbol) []byte {
	b = binary.AppendUvarint(b, zigzag(int64(sym.Object-s.symObject)))
	b = binary.AppendUvarint(b, zigzag(int64(sym.Offset-s.symOffset)))
	b = binary.AppendUvarint(b, uint64(len(sym.Frames)))
	for _, f := range sym.Frames {
		b = binary.AppendUvarint(b, zigzag(int64(f.Function-s.function)))
		b = binary.AppendUvarint(b, zigzag(int64(f.File-s.file)))
		b = binary.AppendUvarint(b, zigzag(int64(f.Line-s.line)))
		s.function, s.file, s.line = f.Function, f.File, f.Line
	}
	s.symObject, s.symOffset = sym.Object, sym.Offset
	return b
}

// symbol decodes the fields of a Symbol record, as appendSymbol wrote them.
func (s *recordState) symbol(d *decoder) *Symbol {
	sym := &Symbol{Object: s.symObject + unzigzag(d.uv()), Offset: s.symOffset + unzigzag(d.uv())}
	if n := d.count(3); n > 0 {
		sym.Frames = make([]Frame, n)
		for i := range sym.Frames {
			f := &sym.Frames[i]
			f.Function = s.function + unzigzag(d.uv())
			f.File = s.file + unzigzag(d.uv())
			f.Line = s.line + unzigzag(d.uv())
			s.function, s.file, s.line = f.Function, f.File, f.Line
		}
	}
	s.symObject, s.symOffset = sym.Object, sym.Offset
	return sym
}
