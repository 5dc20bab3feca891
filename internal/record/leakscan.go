package record

// The leak scan: at a process's normal exit, which blocks still allocated
// are still reachable, possibly lost, indirectly or definitely lost, as
// valgrind's memcheck classifies them (--leak-check=full).
//
// Who does what, and why. A scan needs the set of live blocks. The agent
// does not keep one: it would tax every malloc and free of the program
// with a lock or a concurrent table. The recorder sees every event in
// order anyway, so it keeps the set (liveSet: one insert or delete per
// event, on the recorder's side of the ring; docs/performance.md says
// what it costs). At exit the agent, in the exiting thread, saves its
// registers on its own stack, sends a SCAN record with its stack pointer
// and waits; the recorder, which has then handled every event before the
// exit, reads the process's memory from outside with process_vm_readv (it
// started the process, so the kernel lets it: same user, its child or
// descendant), classifies, writes trace.LeakScan and trace.LeakBlocks and
// lets the agent go on. Scanning from outside keeps the agent small (no
// allocation, no graph in the program's memory) and the program's memory
// untouched by the scan.
//
// Roots are the readable and writable mappings of /proc/PID/maps — the
// data and .bss of every loaded object (and the anonymous mapping that
// continues a .bss), thread stacks with their TLS blocks and thread
// control blocks, the main thread's static TLS, anonymous mmaps — but not
// the heap's own memory: [heap], malloc's other arenas and the mappings of
// big blocks (mallocmem.go), whose stale contents (freed blocks) are no
// roots; a live block there is scanned once it is found reachable. The agent's own data and its shared region
// with the recorder are not roots either. Of a thread's stack, only what
// is above its stack pointer is in use, and its registers are there.
// memcheck scans the same (client memory that is addressable, and every
// thread's registers).
//
// The other threads are stopped while the recorder reads, as valgrind
// stops them: the agent signals each, and its handler notes its stack
// pointer, below the signal frame where the kernel saved its registers,
// and waits for the scan to end (stop_others in the agent's process.c).
// Not ptrace: a tracer is a big thing to be for a program (it changes how
// it sees signals and debuggers). A thread that does not answer in time
// (it blocks the signal) runs on and its stack is scanned whole, which
// can only make more blocks reachable, never fewer.

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/memtrail/memtrail/internal/trace"
)

// leakScan handles a SCAN record w of p: it scans, writes the outcome
// and lets the agent go on, whatever happened.
func (r *Recorder) leakScan(p *process, w []uint64) {
	start := time.Now()
	scan := trace.LeakScan{Process: p.id, Time: r.clock.ns(w[2])}
	var lost []trace.LeakBlock
	if p.live == nil {
		scan.Error = "the recorder does not know the process's heap from its start"
	} else if res, err := scanMemory(p.pid, p.live, parseScan(w), r.opts.AgentPath); err != nil {
		scan.Error = err.Error()
	} else {
		scan.DefinitelyLostBytes, scan.DefinitelyLostBlocks = res.bytes[trace.DefinitelyLost], res.blocks[trace.DefinitelyLost]
		scan.IndirectlyLostBytes, scan.IndirectlyLostBlocks = res.bytes[trace.IndirectlyLost], res.blocks[trace.IndirectlyLost]
		scan.PossiblyLostBytes, scan.PossiblyLostBlocks = res.bytes[trace.PossiblyLost], res.blocks[trace.PossiblyLost]
		scan.StillReachableBytes, scan.StillReachableBlocks = res.bytes[trace.StillReachable], res.blocks[trace.StillReachable]
		lost = res.lost
	}
	scan.Duration = uint64(time.Since(start))
	r.write(r.w.LeakScan(scan))
	if len(lost) > 0 {
		r.write(r.w.LeakBlocks(trace.LeakBlocks{Process: p.id, Blocks: lost}))
	}
	if scan.Error == "" && p.live.origins != nil {
		origins := []trace.LeakOrigin{}
		for _, b := range lost {
			if o, ok := p.live.origins[b.Addr]; ok && b.Class == trace.DefinitelyLost {
				origins = append(origins, o)
			}
		}
		r.write(r.w.LeakOrigins(trace.LeakOrigins{Process: p.id, Origins: origins}))
	}
	if scan.Error != "" {
		fmt.Fprintf(r.log, "memtrail: process %d: no leak scan: %s\n", p.pid, scan.Error)
	}
	atomic.StoreUint64(p.region.u64(hdrScanDone), 1)
	p.region.wake(hdrScanDone, math.MaxInt32) // the exiting thread and the stopped ones
}

// scanRecord is what a SCAN record says: the stack pointers of the
// exiting thread and of the threads stopped for the scan, and the agent's
// own mappings, which are no roots.
type scanRecord struct {
	sps []uint64
	own [][2]uint64 // start and end, in increasing order
}

func parseScan(w []uint64) scanRecord {
	r := scanRecord{sps: []uint64{w[3]}}
	if len(w) <= 4 || w[4] > uint64(len(w)-5) {
		return r
	}
	n := int(w[4])
	r.sps = append(r.sps, w[5:5+n]...)
	if rest := w[5+n:]; len(rest) > 0 && rest[0] <= uint64(len(rest)-1)/2 {
		for i := range int(rest[0]) {
			r.own = append(r.own, [2]uint64{rest[1+2*i], rest[1+2*i] + rest[2+2*i]})
		}
		slices.SortFunc(r.own, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	}
	return r
}

// scanResult is what a scan found: bytes and blocks per class, and the
// lost blocks in increasing order of address.
type scanResult struct {
	bytes, blocks [4]uint64
	lost          []trace.LeakBlock
}

// Block states while marking, as memcheck's.
const (
	unreached = uint8(trace.DefinitelyLost)
	indirect  = uint8(trace.IndirectlyLost)
	possible  = uint8(trace.PossiblyLost)
	reachable = 4
)

// heapGraph is the live blocks in address order and the pointers between
// them: edges[edgeStart[i]:edgeStart[i+1]] are block i's, each a target
// block's index << 1, | 1 when it points into the target's interior.
type heapGraph struct {
	addrs, sizes []uint64
	end          uint64 // the end of the highest block
	edgeStart    []uint32
	edges        []uint32
	// heads are the first two words of each block (0 past its end), and
	// inner the edges into interiors with their pointers: what the
	// heuristics (leakheuristics.go) look at, kept while the blocks are
	// read so that none is read twice.
	heads [][2]uint64
	inner []innerPtr
}

// find returns the index of the block holding address v, or -1. A
// pointer to a block of size 0 must point at its start.
//
// glibc's malloc keeps pointers to its chunk headers in its own state
// (main_arena's top chunk, bins and last remainder, in libc's .data, a
// root). A chunk's header starts 16 bytes before its block, and with
// 16-byte chunks the header of the chunk after a block of 8 mod 16 bytes
// lies in the block's last 8 bytes: such a pointer would keep the block
// possibly lost. memcheck, whose allocator is its own, never sees them;
// so a pointer to exactly that place is not taken for one to the block.
func (g *heapGraph) find(v uint64) int {
	if len(g.addrs) == 0 || v < g.addrs[0] || v >= g.end {
		return -1
	}
	i := sort.Search(len(g.addrs), func(i int) bool { return g.addrs[i] > v }) - 1
	if i < 0 || !(v < g.addrs[i]+g.sizes[i] || v == g.addrs[i]) {
		return -1
	}
	if v != g.addrs[i] && v == g.addrs[i]+(g.sizes[i]+8+15)&^15-16 {
		return -1 // the next chunk's header
	}
	return i
}

// scanMemory classifies the blocks of live in process pid, as its SCAN
// record sr says: its threads' stacks are in use from their stack
// pointers up (the exiting thread's and those stopped for the scan), and
// the agent's own mappings are no roots.
//
//  1. Read every live block and note the pointers it holds to blocks
//     (start or interior): the heap graph.
//  2. Scan the roots: a pointer to a block's start makes it reachable,
//     one into its interior possibly lost.
//  3. Mark from there, as memcheck does: a start pointer from a reachable
//     block makes reachable; any other pointer makes an unreached block
//     possibly lost (a start pointer from a possibly lost block too).
//     In 2 and 3, a pointer into a block's interior that one of
//     memcheck's heuristics accepts (a C++ array, string or base object,
//     leakheuristics.go) counts as a start pointer.
//  4. What is left unreached is lost. In address order, each block still
//     unreached leads a group: the unreached blocks it reaches, by any
//     pointer, are indirectly lost and hang from it; a leader reached from
//     a later group joins that group, with its own. So in a lost cycle
//     the block of lowest address is definitely lost and the rest
//     indirectly.
func scanMemory(pid int, live *liveSet, sr scanRecord, agentPath string) (*scanResult, error) {
	mem := &processMemory{pid: pid}
	g := &heapGraph{}
	g.addrs, g.sizes = live.sorted()
	for i, a := range g.addrs {
		g.end = max(g.end, a+max(g.sizes[i], 1))
	}
	if err := g.readEdges(mem); err != nil {
		return nil, err
	}
	ms, err := readMaps(pid)
	if err != nil {
		return nil, err
	}
	heur := &heuristics{g: g, mem: mem, maps: ms, vtables: map[uint64]bool{}}
	heur.acceptEdges()
	roots := rootRanges(ms, g, mem, sr, agentPath)
	state := make([]uint8, len(g.addrs))
	for i := range state {
		state[i] = unreached
	}
	var stack []int
	push := func(i int, start, definite bool) {
		switch {
		case state[i] == reachable:
		case start && definite:
			state[i] = reachable
			stack = append(stack, i)
		case state[i] == unreached:
			state[i] = possible
			stack = append(stack, i)
		}
	}
	var inner []innerPtr // the roots' pointers into interiors
	for _, rg := range roots {
		err := mem.words(rg[0], rg[1], func(v uint64) {
			if i := g.find(v); i >= 0 && v == g.addrs[i] {
				push(i, true, true)
			} else if i >= 0 {
				inner = append(inner, innerPtr{v: v, block: uint32(i)})
			}
		})
		if err != nil {
			return nil, err
		}
	}
	for k, start := range heur.startLike(inner) {
		push(int(inner[k].block), start, true)
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		definite := state[i] != possible
		for _, e := range g.edges[g.edgeStart[i]:g.edgeStart[i+1]] {
			push(int(e>>1), e&1 == 0, definite)
		}
	}
	leader := make([]int32, len(g.addrs))
	for l := range state {
		if state[l] != unreached {
			continue
		}
		stack = append(stack[:0], l)
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, e := range g.edges[g.edgeStart[i]:g.edgeStart[i+1]] {
				if t := int(e >> 1); state[t] == unreached && t != l {
					state[t], leader[t] = indirect, int32(l)
					stack = append(stack, t)
				}
			}
		}
	}
	res := &scanResult{}
	for i, s := range state {
		class := trace.LeakClass(s)
		if s == reachable {
			class = trace.StillReachable
		}
		res.bytes[class] += g.sizes[i]
		res.blocks[class]++
		if class == trace.StillReachable {
			continue
		}
		b := trace.LeakBlock{Addr: g.addrs[i], Class: class}
		if class == trace.IndirectlyLost {
			b.Leader = g.addrs[finalLeader(leader, state, i)]
		}
		res.lost = append(res.lost, b)
	}
	return res, nil
}

// finalLeader follows the leaders of block i to the definitely lost one,
// and makes each block on the way point at it.
func finalLeader(leader []int32, state []uint8, i int) int {
	l := int(leader[i])
	for state[l] == indirect {
		l = int(leader[l])
	}
	for j := i; state[j] == indirect && int(leader[j]) != l; {
		next := int(leader[j])
		leader[j] = int32(l)
		j = next
	}
	return l
}

// readEdges reads every block and notes the pointers it holds. Blocks
// are read up to a thousand at a time, in one process_vm_readv: one call
// per block made the scan of a million blocks several times slower.
func (g *heapGraph) readEdges(mem *processMemory) error {
	g.edgeStart = make([]uint32, 0, len(g.addrs)+1)
	g.heads = make([][2]uint64, len(g.addrs))
	note := func(v uint64) {
		if t := g.find(v); t >= 0 {
			e := uint32(t) << 1
			if v != g.addrs[t] {
				e |= 1
				g.inner = append(g.inner, innerPtr{v: v, block: uint32(t), edge: uint32(len(g.edges))})
			}
			g.edges = append(g.edges, e)
		}
	}
	const batchBlocks, batchBytes = 1024, 1 << 20
	for i := 0; i < len(g.addrs); {
		j, bytes := i, uint64(0)
		for j < len(g.addrs) && j-i < batchBlocks && (j == i || bytes+g.sizes[j] <= batchBytes) {
			bytes += g.sizes[j] &^ 7
			j++
		}
		if b, ok := mem.readBlocks(g.addrs[i:j], g.sizes[i:j]); ok {
			for k := i; k < j; k++ {
				g.edgeStart = append(g.edgeStart, uint32(len(g.edges)))
				n := g.sizes[k] &^ 7
				g.heads[k] = headOf(b[:n])
				for w := uint64(0); w < n; w += 8 {
					note(wordAt(b, w))
				}
				b = b[n:]
			}
		} else {
			for k := i; k < j; k++ { // one at a time, skipping pages that cannot be read
				g.edgeStart = append(g.edgeStart, uint32(len(g.edges)))
				if n := min(g.sizes[k]&^7, 16); n > 0 {
					if b, err := mem.read(g.addrs[k], n); err == nil {
						g.heads[k] = headOf(b)
					}
				}
				if err := mem.words(g.addrs[k], g.addrs[k]+g.sizes[k], note); err != nil {
					return err
				}
			}
		}
		i = j
	}
	g.edgeStart = append(g.edgeStart, uint32(len(g.edges)))
	return nil
}

// headOf returns the first two words of b (0 for those past its end).
func headOf(b []byte) (head [2]uint64) {
	for i := range head {
		if uint64(len(b)) >= uint64(i+1)*8 {
			head[i] = wordAt(b, uint64(i)*8)
		}
	}
	return head
}

// wordAt returns the 64-bit word at offset off of b.
func wordAt(b []byte, off uint64) uint64 {
	return *(*uint64)(unsafe.Pointer(&b[off]))
}

// wordsAt reads the word at each of addrs (8-byte aligned); a word that
// cannot be read is 0. Addresses close to each other are read as one
// range, and ranges a thousand at a time: process_vm_readv costs about as
// much for one more range as for a few more KiB of one (8-byte ranges made
// a million words take 0.37 s).
func (m *processMemory) wordsAt(addrs []uint64) []uint64 {
	const gap, span = 2048, 64 << 10
	order := make([]int, len(addrs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(addrs[a], addrs[b]) })
	var los, sizes []uint64 // the ranges, in address order
	for _, k := range order {
		a, n := addrs[k], len(los)
		if n > 0 && a <= los[n-1]+sizes[n-1]+gap && a+8-los[n-1] <= span {
			sizes[n-1] = max(sizes[n-1], a+8-los[n-1])
		} else {
			los, sizes = append(los, a), append(sizes, 8)
		}
	}
	out := make([]uint64, len(addrs))
	// take gives the addresses of range r, from order[next] on, their
	// words in b, the range's bytes, or one at a time if b is nil.
	next := 0
	take := func(r int, b []byte) {
		for ; next < len(order) && addrs[order[next]] < los[r]+sizes[r]; next++ {
			k := order[next]
			if b != nil {
				out[k] = wordAt(b, addrs[k]-los[r])
			} else if w, err := m.read(addrs[k], 8); err == nil {
				out[k] = wordAt(w, 0)
			}
		}
	}
	const batchRanges, batchBytes = 1024, 1 << 20
	for i := 0; i < len(los); {
		j, bytes := i, uint64(0)
		for j < len(los) && j-i < batchRanges && (j == i || bytes+sizes[j] <= batchBytes) {
			bytes += sizes[j]
			j++
		}
		if b, ok := m.readBlocks(los[i:j], sizes[i:j]); ok {
			for r := i; r < j; r++ {
				take(r, b[:sizes[r]])
				b = b[sizes[r]:]
			}
		} else {
			for r := i; r < j; r++ {
				b, _ := m.read(los[r], sizes[r]) // nil if it cannot be read
				take(r, b)
			}
		}
		i = j
	}
	return out
}

// readBlocks reads the whole words of blocks (8-byte aligned, as malloc's
// are) one after the other, in one call; false if not all could be read.
func (m *processMemory) readBlocks(addrs, sizes []uint64) ([]byte, bool) {
	var total uint64
	for _, s := range sizes {
		total += s &^ 7
	}
	if total == 0 {
		return nil, true
	}
	if uint64(cap(m.buf)) < total {
		m.buf = make([]byte, total)
	}
	b := m.buf[:total]
	remote := m.remote[:0]
	for k, a := range addrs {
		if n := sizes[k] &^ 7; n > 0 {
			remote = append(remote, unix.RemoteIovec{Base: uintptr(a), Len: int(n)})
		}
	}
	m.remote = remote
	got, err := unix.ProcessVMReadv(m.pid, []unix.Iovec{{Base: &b[0], Len: total}}, remote, 0)
	return b, err == nil && uint64(got) == total
}

// mapping is a line of /proc/PID/maps.
type mapping struct {
	start, end        uint64
	read, write, exec bool
	path              string
}

// isFile reports whether the mapping is of a file (its path is one, not
// a name in brackets nor empty for anonymous memory).
func (m *mapping) isFile() bool { return strings.HasPrefix(m.path, "/") }

func readMaps(pid int) ([]mapping, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, fmt.Errorf("reading the process's mappings: %w", err)
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || len(fields[1]) < 3 {
			return nil, fmt.Errorf("reading the process's mappings: bad line %q", sc.Text())
		}
		m := mapping{start: start, end: end, read: fields[1][0] == 'r', write: fields[1][1] == 'w', exec: fields[1][2] == 'x'}
		if len(fields) >= 6 {
			m.path = strings.Join(fields[5:], " ")
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the process's mappings: %w", err)
	}
	return out, nil
}

// rootRanges returns the ranges of memory of mappings ms to scan for
// roots (see the top of this file).
func rootRanges(ms []mapping, g *heapGraph, mem *processMemory, sr scanRecord, agentPath string) [][2]uint64 {
	skip := mergeRanges(append(mallocRanges(g, mem, ms), sr.own...))
	var out [][2]uint64
	for _, m := range ms {
		if !m.read || !m.write || m.path == "[heap]" || m.path == agentPath || strings.HasPrefix(m.path, "/memfd:memtrail") {
			continue
		}
		start := m.start
		for _, sp := range sr.sps {
			if sp >= m.start && sp < m.end && sp&^7 > start {
				start = sp &^ 7 // a thread's stack: in use from there up
			}
		}
		out = appendOutside(out, start, m.end, skip)
	}
	return out
}

// appendOutside appends to out the parts of [lo, hi) outside the ranges
// of skip (in increasing order, not overlapping).
func appendOutside(out [][2]uint64, lo, hi uint64, skip [][2]uint64) [][2]uint64 {
	for _, o := range skip {
		if o[1] <= lo || o[0] >= hi {
			continue
		}
		if o[0] > lo {
			out = append(out, [2]uint64{lo, o[0]})
		}
		lo = max(lo, o[1])
	}
	if lo < hi {
		out = append(out, [2]uint64{lo, hi})
	}
	return out
}

// processMemory reads another process's memory.
type processMemory struct {
	pid    int
	buf    []byte
	remote []unix.RemoteIovec
}

const pageSize = 4096

// words calls f with each aligned 64-bit word wholly in [lo, hi). Pages
// that cannot be read (a guard page, an I/O mapping) are skipped; a
// process that cannot be read at all is an error.
func (m *processMemory) words(lo, hi uint64, f func(uint64)) error {
	lo = (lo + 7) &^ 7
	hi &^= 7
	for lo < hi {
		n := min(hi-lo, 1<<20)
		b, err := m.read(lo, n)
		if err != nil {
			// Page by page: keep what can be read.
			next := min((lo+pageSize)&^(pageSize-1), hi)
			if b, err = m.read(lo, next-lo); errors.Is(err, unix.ESRCH) || errors.Is(err, unix.EPERM) {
				return fmt.Errorf("reading the memory of process %d: %w", m.pid, err)
			}
			n = next - lo
		}
		for i := 0; i+8 <= len(b); i += 8 {
			f(*(*uint64)(unsafe.Pointer(&b[i])))
		}
		lo += n
	}
	return nil
}

// read reads n bytes at addr, all of them or an error.
func (m *processMemory) read(addr, n uint64) ([]byte, error) {
	if uint64(cap(m.buf)) < n {
		m.buf = make([]byte, n)
	}
	b := m.buf[:n]
	local := []unix.Iovec{{Base: &b[0], Len: n}}
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: int(n)}}
	got, err := unix.ProcessVMReadv(m.pid, local, remote, 0)
	if err != nil {
		return nil, err
	}
	if uint64(got) != n {
		return nil, unix.EFAULT
	}
	return b, nil
}
