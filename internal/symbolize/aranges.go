package symbolize

import (
	"encoding/binary"
	"errors"
)

// parseAranges decodes a .debug_aranges section: for each compilation
// unit (by its offset in .debug_info), the address ranges it covers.
// debug/dwarf reads this section but does not expose it.
//
// Each set is a header (unit_length, version 2, debug_info_offset,
// address_size, segment_selector_size), padding up to a multiple of twice
// the address size, then (address, length) pairs ending with (0, 0).
func parseAranges(data []byte, order binary.ByteOrder) (map[uint64][][2]uint64, error) {
	errTruncated := errors.New("truncated .debug_aranges")
	units := map[uint64][][2]uint64{}
	for len(data) > 0 {
		if len(data) < 4 {
			return nil, errTruncated
		}
		length := uint64(order.Uint32(data))
		headerSize := 4
		offsetSize := 4
		if length == 0xffffffff {
			if len(data) < 12 {
				return nil, errTruncated
			}
			length = order.Uint64(data[4:])
			headerSize = 12
			offsetSize = 8
		}
		if length > uint64(len(data)-headerSize) {
			return nil, errTruncated
		}
		set := data[:headerSize+int(length)]
		data = data[len(set):]

		pos := headerSize
		if len(set) < pos+2+offsetSize+2 {
			return nil, errTruncated
		}
		if version := order.Uint16(set[pos:]); version != 2 {
			// A version we do not know: skip the set, the compilation
			// unit's own ranges will be used instead.
			continue
		}
		pos += 2
		var unitOffset uint64
		if offsetSize == 8 {
			unitOffset = order.Uint64(set[pos:])
		} else {
			unitOffset = uint64(order.Uint32(set[pos:]))
		}
		pos += offsetSize
		addrSize := int(set[pos])
		segmentSize := int(set[pos+1])
		pos += 2
		if addrSize != 4 && addrSize != 8 || segmentSize != 0 {
			continue
		}
		tupleSize := 2 * addrSize
		if r := pos % tupleSize; r != 0 {
			pos += tupleSize - r
		}
		ranges := units[unitOffset]
		for ; pos+tupleSize <= len(set); pos += tupleSize {
			var addr, size uint64
			if addrSize == 8 {
				addr, size = order.Uint64(set[pos:]), order.Uint64(set[pos+8:])
			} else {
				addr, size = uint64(order.Uint32(set[pos:])), uint64(order.Uint32(set[pos+4:]))
			}
			if addr == 0 && size == 0 {
				break
			}
			ranges = append(ranges, [2]uint64{addr, addr + size})
		}
		units[unitOffset] = ranges
	}
	return units, nil
}
