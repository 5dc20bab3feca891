package symbolize

// ULEB128 decodes the unsigned LEB128 number at the start of p, as DWARF
// and .eh_frame write them, and returns it with its length in bytes; 0
// bytes if p ends inside it. Bits past the 64th are dropped.
func ULEB128(p []byte) (uint64, int) {
	var v uint64
	for i, c := range p {
		if shift := 7 * i; shift < 64 {
			v |= uint64(c&0x7f) << shift
		}
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

// SLEB128 decodes the signed LEB128 number at the start of p, as ULEB128
// does the unsigned ones.
func SLEB128(p []byte) (int64, int) {
	var v int64
	for i, c := range p {
		shift := 7 * i
		if shift < 64 {
			v |= int64(c&0x7f) << shift
		}
		if c&0x80 == 0 {
			if shift += 7; shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, i + 1
		}
	}
	return 0, 0
}
