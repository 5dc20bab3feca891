package record

import (
	"cmp"
	"slices"
	"sort"
)

// Which memory is malloc's own, and so no root of the leak scan: its
// stale contents (freed blocks, its free lists) would keep lost blocks
// reachable. The main arena is the [heap] mapping. Other memory is found
// from the live blocks in it, by glibc's chunk header, the word before a
// block: its size, with flags in the low bits.
//
//   - A block of IS_MMAPPED (0x2) has a mapping of its own: from its
//     header (16 bytes before the block, less the prev_size word's
//     alignment offset) to the header plus the chunk's size.
//   - A block of NON_MAIN_ARENA (0x4) lies in a heap of a thread arena:
//     64 MiB of address space aligned to 64 MiB (glibc's HEAP_MAX_SIZE on
//     64-bit), all of it malloc's.
//   - Anything else outside [heap] (the main arena grown with mmap when
//     brk could not, or an allocator that is not glibc's): the whole
//     mapping that holds the block, as before these rules.
//
// Whole mappings are not enough for the first two: the kernel merges
// adjacent anonymous mappings into one, so a mapping of malloc's may come
// joined to one of the program's (python3's object arenas, full of
// pointers to blocks), and leaving that out made blocks look lost.
const (
	chunkMmapped      = 0x2
	chunkNonMainArena = 0x4
	chunkFlags        = 0x7
	threadHeapSize    = 64 << 20
)

// mallocRanges returns the ranges of memory, outside [heap], that are
// malloc's, in increasing order and not overlapping.
func mallocRanges(ix *blockIndex, mem *processMemory, ms []mapping) [][2]uint64 {
	// outside calls f with each block outside [heap], in address order.
	outside := func(f func(addr, size uint64)) {
		for _, m := range ms {
			if m.path != "[heap]" {
				ix.each(m.start, m.end, func(_ uint32, addr, size uint64) { f(addr, size) })
			}
		}
	}
	// A thread arena's heap takes in its whole 64 MiB window: read the
	// header of the first block of each window first, and then only those
	// of the blocks outside what that found (big blocks, mostly), rather
	// than read every block's header, which a program whose threads
	// allocate has millions of.
	var out [][2]uint64
	classify := func(blocks [][2]uint64) {
		words := make([]uint64, 0, 2*len(blocks))
		for _, b := range blocks {
			words = append(words, b[0]-16, b[0]-8) // prev_size, size
		}
		header := mem.wordsAt(words)
		for k, b := range blocks {
			out = append(out, chunkRange(ms, b[0], b[1], header[2*k], header[2*k+1]))
		}
	}
	var firsts [][2]uint64
	window := ^uint64(0)
	outside(func(addr, size uint64) {
		if w := addr &^ (threadHeapSize - 1); w != window {
			firsts, window = append(firsts, [2]uint64{addr, size}), w
		}
	})
	if len(firsts) == 0 {
		return nil
	}
	classify(firsts)
	found := mergeRanges(slices.Clone(out))
	var rest [][2]uint64
	outside(func(addr, size uint64) {
		if !inRanges(found, addr) {
			rest = append(rest, [2]uint64{addr, size})
		}
	})
	classify(rest)
	return mergeRanges(out)
}

// chunkRange returns the memory of malloc's that holds the block of size
// bytes at addr, whose chunk header holds prevSize and size.
func chunkRange(ms []mapping, addr, blockSize, prevSize, size uint64) [2]uint64 {
	chunk := size &^ chunkFlags
	switch {
	case chunk < blockSize+8 || addr&15 != 0:
		return mappingOf(ms, addr) // not a chunk of glibc's
	case size&chunkMmapped != 0:
		start := addr - 16 - prevSize
		return [2]uint64{start &^ (pageSize - 1), (addr - 16 + chunk + pageSize - 1) &^ (pageSize - 1)}
	case size&chunkNonMainArena != 0:
		heap := addr &^ (threadHeapSize - 1)
		return [2]uint64{heap, heap + threadHeapSize}
	}
	return mappingOf(ms, addr)
}

// inRanges reports whether addr is in one of rs (in increasing order, not
// overlapping).
func inRanges(rs [][2]uint64, addr uint64) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i][1] > addr })
	return i < len(rs) && rs[i][0] <= addr
}

// mappingOf returns the range of the mapping of ms that holds addr.
func mappingOf(ms []mapping, addr uint64) [2]uint64 {
	for _, m := range ms {
		if addr >= m.start && addr < m.end {
			return [2]uint64{m.start, m.end}
		}
	}
	return [2]uint64{addr, addr + 1}
}

// mergeRanges sorts ranges and joins those that overlap or touch.
func mergeRanges(rs [][2]uint64) [][2]uint64 {
	slices.SortFunc(rs, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}
