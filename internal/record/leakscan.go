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
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/memtrail/memtrail/internal/pages"
	"github.com/memtrail/memtrail/internal/trace"
)

// leakScan handles a SCAN record w of p, sent by its thread tid: it
// scans, writes the outcome and lets the agent go on, whatever happened.
func (r *Recorder) leakScan(p *process, w []uint64, tid uint64) {
	start := time.Now()
	scan := trace.LeakScan{Process: p.id, Time: r.clock.ns(w[2])}
	var lost []trace.LeakBlock
	through := readThrough(p.pid, tid)
	if p.live == nil {
		scan.Error = "the recorder does not know the process's heap from its start"
	} else if res, err := scanMemory(through, p.live, parseScan(w), r.opts.AgentPath); err != nil && endedDuringScan(through) {
		// The process is held in exit until the scan is done: only a
		// signal from outside (chromium's browser ends its renderers
		// so) ends it before that.
		scan.Error = "the process ended while it was being scanned (" + err.Error() + ")"
	} else if err != nil {
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
		fmt.Fprintf(r.log, "memtrail: %s: no leak scan: %s\n", p, scan.Error)
	}
	atomic.StoreUint64(p.region.u64(hdrScanDone), 1)
	p.region.wake(hdrScanDone, math.MaxInt32) // the exiting thread and the stopped ones
}

// endedDuringScan reports whether thread tid, through which a failed scan
// read its process, has ended: it is gone, a zombie, or on its way out
// (PF_EXITING in its flags; its memory goes before it becomes a zombie,
// and reads then fail with ESRCH).
func endedDuringScan(tid int) bool {
	const pfExiting = 0x4
	fields, ok := statFields(tid)
	if !ok || zombie(fields) {
		return true
	}
	if len(fields) <= 6 {
		return false
	}
	// flags is field 9 of /proc/tid/stat, the 7th from the state on.
	flags, err := strconv.ParseUint(fields[6], 10, 64)
	return err == nil && flags&pfExiting != 0
}

// readThrough returns the thread of process pid through which its memory
// and mappings are read: tid, the thread that exits and waits for the
// scan, if it is one of the process's. Not the process's pid: that is its
// main thread, which may have ended already (pthread_exit) and, a zombie
// until the whole process ends, has no memory any more.
func readThrough(pid int, tid uint64) int {
	if tid == 0 || tid > math.MaxInt32 {
		return pid
	}
	// The agent wrote tid in memory the program can write: it must name
	// a thread of this process, not some other one.
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", pid, tid)); err != nil {
		return pid
	}
	return int(tid)
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

// How much of the program's memory the scan reads at once: blocks are
// read a batch at a time, sorted by address, those close to each other as
// one range, in process_vm_readv calls of up to batchRanges ranges (one
// call a block made the scan of a million blocks several times slower);
// roots and blocks bigger than a window are read a window at a time. So
// what the scan holds follows the window, not the heap. A batch holds up
// to batchBlocks blocks: each batch is handed to a goroutine and back,
// which costs, on a busy machine, what reading a thousand small blocks
// does.
const (
	scanWindow  = 1 << 20
	batchRanges = 1024 // the most process_vm_readv takes
	batchBlocks = 16384
	rangeGap    = pageSize // bytes between blocks read with them rather than in another range
	// gapBudget bounds the bytes between the blocks of a batch that it
	// reads with them. batchBlocks small blocks of a dense heap (every
	// other one freed, say) have more than a window between them, and
	// past the budget each block is a range of its own, which costs
	// process_vm_readv what a few KiB more of a range would.
	gapBudget = 2 * scanWindow
	// A batch of one block reads from minReadAhead to maxReadAhead bytes
	// (see marker.startBatch).
	minReadAhead = 4 << 10
	maxReadAhead = 256 << 10
	innerBatch   = 4096
)

// inlineBytes is how much memory a batch reads at least to be read on a
// goroutine of its own.
const inlineBytes = 64 << 10

// inflightBatches is how many batches (or windows) are in flight at once:
// one whose words are noted, and one read for each CPU. A variable, so
// that tests can check that any number marks the same.
var inflightBatches = min(runtime.GOMAXPROCS(0), 4) + 1

// marker marks the blocks of a blockIndex from the roots (step 2 and 3
// of scanMemory).
type marker struct {
	ix    *blockIndex
	heur  *heuristics
	state []uint8      // by block number
	stack []stackEntry // the blocks whose state rose, to scan
	big   []uint64     // the addresses of those bigger than a window
	inner []innerPtr
	// batches are read (and their words looked up) while those read
	// before are noted: inflight, in the order they were started.
	batches  []blockBatch
	inflight []*blockBatch
	read     chan struct{} // a word from each goroutine that read a batch
	windows  []blockBatch  // of roots and big blocks: the next ones read while one is noted
	// ahead is how much a batch of one block reads from its start, and
	// aheadHits how many batches its last such read served.
	ahead     uint64
	aheadHits int
	aheadLast uint64 // the block the last read ahead was for
	pid       int
	err       error
	// reached counts the reachable blocks, smallReads the batches of
	// fewer than smallBatch blocks read, for the sweep (leaksweep.go),
	// whose graph the marking uses once it has one.
	reached    int
	smallReads int
	graph      *blockGraph
	noSweep    bool
}

// stackEntry is a block to scan: its address, number and size, up to
// math.MaxUint32 (a bigger one is bigger than a window anyway).
type stackEntry struct {
	addr      uint64
	num, size uint32
}

// scanItem is a block of a batch.
type scanItem struct {
	addr, size uint64
	definite   bool
}

// push raises block num's state, for a pointer to it from a reachable
// block or a root (definite) or from a possibly lost one: a start pointer
// makes it reachable, any other pointer possibly lost.
func (m *marker) push(num uint32, addr, size uint64, start, definite bool) {
	if m.raise(num, start, definite) {
		m.stack = append(m.stack, stackEntry{addr: addr, num: num, size: uint32(min(size, math.MaxUint32))})
	}
}

// raise raises block num's state as push says, and reports whether it
// rose.
func (m *marker) raise(num uint32, start, definite bool) bool {
	switch st := m.state[num]; {
	case st == reachable:
		return false
	case start && definite:
		m.state[num] = reachable
		m.reached++
	case st == unreached:
		m.state[num] = possible
	default:
		return false
	}
	return true
}

// note handles a word v of a root or of a block.
func (m *marker) note(v uint64, definite bool) {
	if num, start, size, ok := m.ix.find(v); ok {
		m.noteFound(innerPtr{v: v, start: start, size: size, num: num, definite: definite})
	}
}

// noteFound handles a word p.v of a root or of a block that points into
// the block p describes.
func (m *marker) noteFound(p innerPtr) {
	if p.v == p.start {
		m.push(p.num, p.start, p.size, true, p.definite)
		return
	}
	if st := m.state[p.num]; st == reachable || st == possible && !p.definite {
		return // no pointer of this kind can raise it
	}
	m.inner = append(m.inner, p)
	if len(m.inner) >= innerBatch {
		m.resolveInner()
	}
}

// resolveInner pushes the blocks of the pointers into interiors noted so
// far, as start pointers where a heuristic takes them for ones.
func (m *marker) resolveInner() {
	for k, start := range m.heur.startLike(m.inner) {
		p := m.inner[k]
		m.push(p.num, p.start, p.size, start, p.definite)
	}
	m.inner = m.inner[:0]
}

// drain scans the blocks whose state rose until there are none.
func (m *marker) drain() {
	for m.drainSmall(); len(m.big) > 0 && m.err == nil; m.drainSmall() {
		a := m.big[len(m.big)-1]
		m.big = m.big[:len(m.big)-1]
		num, _, size, _ := m.ix.find(a)
		m.scanRange(a, a+size&^7, m.state[num] != possible)
	}
}

// drainSmall scans the blocks whose state rose, but for those bigger than
// a window, which it leaves in m.big. While it notes the pointers of one
// batch, the next ones are read and their words looked up in the index,
// each on a goroutine of its own: the scan holds the program, so the
// machine's CPUs are the recorder's, and notes in the order of the
// batches' words give the outcome a scan a word at a time would.
func (m *marker) drainSmall() {
	for m.err == nil {
		if len(m.inflight) == 0 && len(m.stack) > 0 && m.shouldSweep() {
			m.sweep()
			continue
		}
		for len(m.stack) > 0 && len(m.inflight) < len(m.batches) {
			bb := m.startBatch()
			if bb == nil {
				break
			}
			m.inflight = append(m.inflight, bb)
		}
		if len(m.inflight) > 0 {
			i := m.nextRead()
			bb := m.inflight[i]
			m.inflight = slices.Delete(m.inflight, i, i+1)
			m.finishBatch(bb)
			continue
		}
		if len(m.inner) == 0 {
			return
		}
		m.resolveInner()
	}
	for _, bb := range m.inflight {
		bb.cancel()
	}
	m.inflight = m.inflight[:0]
}

// nextRead returns the index in m.inflight of a batch read: one that a
// goroutine has read, or else the oldest if none has begun it (read
// here), or else the first a goroutine reads. The outcome is the same in
// whatever order batches are noted, and on a busy machine the thread of a
// batch's goroutine may be put aside for a while: the scan goes on with
// the others meanwhile. A younger batch not begun is left to its
// goroutine: on an idle machine it begins as soon as a CPU is free.
func (m *marker) nextRead() int {
	for {
		for i, bb := range m.inflight {
			select {
			case <-bb.done:
				return i
			default:
			}
		}
		if bb := m.inflight[0]; bb.claimed.CompareAndSwap(false, true) {
			bb.work()
			close(bb.done)
			return 0
		}
		<-m.read
	}
}

// scanRange notes the words of [lo, hi) a window at a time, scanning
// what each window raises before noting the next (but the big blocks);
// the next window is read meanwhile.
func (m *marker) scanRange(lo, hi uint64, definite bool) {
	lo, hi = (lo+7)&^7, hi&^7
	if lo >= hi || m.err != nil {
		return
	}
	// Window k is read by windows[k%len(windows)].
	next := lo // the next window to start
	start := func(k int) {
		bb := &m.windows[k%len(m.windows)]
		bb.items = append(bb.items[:0], scanItem{addr: next, size: min(next+scanWindow, hi) - next, definite: definite})
		bb.plan()
		bb.launch(bb.items[0].size, func() {
			bb.read()
			bb.collect()
		})
		next += bb.items[0].size
	}
	started := 0 // windows k to started-1 are in flight
	for k := 0; ; k++ {
		for started-k < len(m.windows) && next < hi && m.err == nil {
			start(started)
			started++
		}
		if k == started {
			return
		}
		m.finishBatch(&m.windows[k%len(m.windows)])
		if m.err == nil {
			m.drainSmall()
		}
	}
}

// startBatch takes blocks off the stack and starts reading them, in a
// batch not in flight; nil if they were all bigger than a window.
func (m *marker) startBatch() *blockBatch {
	var bb *blockBatch
	for i := range m.batches {
		if !slices.Contains(m.inflight, &m.batches[i]) {
			bb = &m.batches[i]
			break
		}
	}
	bb.items = bb.items[:0]
	var bytes uint64
	if m.graph != nil {
		// One block at a time: following the sweep's graph pushes.
		for len(m.stack) > 0 && len(bb.items) < batchBlocks && bytes < scanWindow {
			e := m.stack[len(m.stack)-1]
			m.stack = m.stack[:len(m.stack)-1]
			if m.graph.has(e.num) {
				m.follow(e.num)
				continue
			}
			bytes += m.take(bb, e)
		}
	} else {
		// The blocks at the top of the stack, taken in the order they
		// were pushed: a root or a block of pointers often holds them
		// in increasing order of address, and those need no sort.
		from, n := len(m.stack), 0
		for from > 0 && n < batchBlocks && bytes < scanWindow {
			from--
			if size := uint64(m.stack[from].size); size <= scanWindow {
				n, bytes = n+1, bytes+size
			}
		}
		// n of them are taken: items is filled in place rather than
		// appended to, a check less for each of a big heap's blocks.
		items, i := slices.Grow(bb.items[:0], n)[:n], 0
		for _, e := range m.stack[from:] {
			if it, ok := m.item(e); ok {
				items[i] = it
				i++
			}
		}
		bb.items = items
		m.stack = m.stack[:from]
	}
	if len(bb.items) == 0 {
		return nil // all big
	}
	if bb.fromCache() {
		m.aheadHits++
		sortByAddress(bb.items)
		bb.launch(0, bb.collect)
		return bb
	}
	if len(bb.items) < smallBatch {
		m.smallReads++
	}
	if len(bb.items) > 1 {
		bb.launch(bytes, func() {
			sortByAddress(bb.items)
			bb.plan()
			bb.read()
			bb.collect()
		})
		return bb
	}
	// One block, as when following a list: read the memory after it
	// too, where the next often is, as much more as the last such read
	// was of use.
	if m.aheadHits > 0 {
		m.ahead = min(2*m.ahead, maxReadAhead)
	} else {
		m.ahead = max(m.ahead/2, minReadAhead)
	}
	m.aheadHits = 0
	// A list may run down in memory as well as up (a list built by
	// pushing at its head, from blocks carved one after the other).
	at := bb.items[0].addr
	ahead, back := m.ahead, at < m.aheadLast
	m.aheadLast = at
	bb.launch(max(ahead, bytes), func() {
		bb.readAhead(ahead, back)
		bb.collect()
	})
	return bb
}

// take adds block e, off the stack, to bb, or to m.big if it is bigger
// than a window, and returns the bytes it added to bb.
func (m *marker) take(bb *blockBatch, e stackEntry) uint64 {
	it, ok := m.item(e)
	if !ok {
		return 0
	}
	bb.items = append(bb.items, it)
	return it.size
}

// item returns block e, off the stack, as an item of a batch, or false
// if it is bigger than a window: then it is m.big's.
func (m *marker) item(e stackEntry) (scanItem, bool) {
	if uint64(e.size) > scanWindow {
		m.big = append(m.big, e.addr)
		return scanItem{}, false
	}
	return scanItem{addr: e.addr, size: uint64(e.size), definite: m.state[e.num] != possible}, true
}

// launch has work, reading about bytes, done for bb on a goroutine of
// its own, or by wait if that goroutine has not begun it yet: on a busy
// machine a goroutine's thread may start long after, and the scan, the
// program held, would wait on the rest of the machine rather than do the
// work. Work of less than inlineBytes is done at once: handing it over
// costs more than it.
//
// A goroutine of bb's last launch that starts late may do the work of
// this one: it reads bb.work and bb.done only once it has claimed them.
func (bb *blockBatch) launch(bytes uint64, work func()) {
	bb.done = make(chan struct{})
	if bytes < inlineBytes {
		bb.claimed.Store(true)
		work()
		close(bb.done)
		return
	}
	bb.work = work
	bb.claimed.Store(false)
	go func() {
		if bb.claimed.CompareAndSwap(false, true) {
			bb.work()
			close(bb.done)
			if bb.told != nil {
				select {
				case bb.told <- struct{}{}:
				default: // a word is waiting already
				}
			}
		}
	}()
}

// wait returns once bb's work is done, doing it itself if no goroutine
// has begun it.
func (bb *blockBatch) wait() {
	if bb.claimed.CompareAndSwap(false, true) {
		bb.work()
		close(bb.done)
		return
	}
	<-bb.done
}

// cancel returns once bb's work is done or will never be.
func (bb *blockBatch) cancel() {
	if !bb.claimed.CompareAndSwap(false, true) {
		<-bb.done
	}
}

// sortByAddress sorts items by address. Items in increasing or
// decreasing order (as a root or a block of pointers often holds them)
// need no sort.
func sortByAddress(items []scanItem) {
	i := 1
	for i < len(items) && items[i].addr > items[i-1].addr {
		i++
	}
	if i >= len(items) {
		return
	}
	descending := true
	for i := 1; i < len(items) && descending; i++ {
		descending = items[i].addr < items[i-1].addr
	}
	if descending {
		slices.Reverse(items)
		return
	}
	slices.SortFunc(items, func(a, b scanItem) int { return cmp.Compare(a.addr, b.addr) })
}

// finishBatch waits for bb's pointers to blocks and notes them.
func (m *marker) finishBatch(bb *blockBatch) {
	bb.wait()
	if bb.err != nil {
		m.err = bb.err
		return
	}
	inner := bb.inner
	for _, h := range bb.hits {
		definite := h.size&hitDefinite != 0
		if h.size&hitInterior == 0 {
			m.push(h.num, h.start, uint64(h.size&hitSize), true, definite)
			continue
		}
		m.noteFound(inner[0])
		inner = inner[1:]
	}
}

// hit is a pointer to a block's start (or, hitInterior, into it) that
// collect found: the block's number, start and size, up to hitSize (a
// bigger one is bigger than a window anyway), and flags.
type hit struct {
	start     uint64
	num, size uint32
}

const (
	hitInterior = 1 << 31 // the pointer is the next of the batch's inner
	hitDefinite = 1 << 30 // from a root or a reachable block
	hitSize     = 1<<30 - 1
)

// collect looks up the words of bb's blocks, read, in the index: its hits
// are those that point into a block, in the order of the words. It runs
// on the goroutine that read them, with bb's own finder.
func (bb *blockBatch) collect() {
	bb.hits, bb.inner = bb.hits[:0], bb.inner[:0]
	lo, span := bb.f.ix.lo, bb.f.ix.hi-bb.f.ix.lo
	if !bb.ok {
		bb.err = bb.each(func(k int, b []byte) { bb.collectWords(asWords(b), lo, span, bb.items[k].definite) })
		return
	}
	// As each does, without a call through a func value for each of
	// the millions of small blocks of a big heap.
	r, off := 0, uint64(0)
	for _, b := range bb.items {
		bb.collectWords(asWords(bb.inBuf(b, &r, &off)), lo, span, b.definite)
	}
	bb.err = nil
}

// asWords returns the whole words of b, which x86 and arm64 load at any
// address.
func asWords(b []byte) []uint64 {
	if len(b) < 8 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8)
}

// inBuf returns the whole words of block b, of a batch read in one call,
// from bb.buf. r is the range of the block before b (0 for the first),
// which starts at off in buf: blocks are in increasing order of address,
// so inBuf moves r and off on to b's range.
func (bb *blockBatch) inBuf(b scanItem, r *int, off *uint64) []byte {
	for b.addr > bb.his[*r] {
		*off += bb.sizes[*r]
		*r++
	}
	at := *off + b.addr - bb.los[*r]
	return bb.buf[at : at+b.size&^7]
}

// collectWords looks up the words of a block of bb, from a root or a
// reachable block if definite; the index's blocks lie in [lo, lo+span).
// Small enough to be inlined in collect's loop over the blocks: most
// words of a heap's blocks point nowhere near it, and only those that
// might are handed to collectWord.
func (bb *blockBatch) collectWords(words []uint64, lo, span uint64, definite bool) {
	for _, v := range words {
		if v-lo < span {
			bb.collectWord(v, definite)
		}
	}
}

// collectWord looks up v, a word of a block of bb within the index's
// bounds.
func (bb *blockBatch) collectWord(v uint64, definite bool) {
	f := &bb.f
	flags := uint32(0)
	if definite {
		flags = hitDefinite
	}
	var h hit
	// Most words that point into the heap point at the start of a block
	// in the page found last (a block of pointers to blocks carved one
	// after the other): that case is answered here, as find would.
	// With odd blocks, find looks at those first.
	if v>>tablePageBits+1 == f.lastKey && len(f.ix.odd) == 0 && f.lastPage.startsAt(v) {
		r := f.lastPage.rank(slotIn(v))
		size := f.ix.t.sizeAt(f.lastPage, r, v)
		h = hit{start: v, num: f.lastBase + uint32(r), size: uint32(min(size, hitSize)) | flags}
	} else {
		num, start, size, ok := f.find(v)
		if !ok {
			return
		}
		h = hit{start: start, num: num, size: uint32(min(size, hitSize)) | flags}
		if v != start {
			h.size |= hitInterior
			bb.inner = append(bb.inner, innerPtr{v: v, start: start, size: size, num: num, definite: definite})
		}
	}
	if len(bb.hits) == cap(bb.hits) {
		// Doubled by hand: append grows a slice of a hundred thousand
		// by a quarter, and copies it over and over.
		bb.hits = append(make([]hit, 0, max(2*cap(bb.hits), 1024)), bb.hits...)
	}
	bb.hits = append(bb.hits, h)
}

// blockBatch is blocks (in increasing order of address, not overlapping)
// to read at once: those close to each other are read as one range.
type blockBatch struct {
	items           []scanItem
	mem             *processMemory
	los, his, sizes []uint64 // the ranges
	buf             []byte   // the ranges' bytes, one after the other
	ok              bool     // all of them could be read
	// work is what is to be done for the batch: by whoever claims it
	// first, the goroutine launched or wait; done closes after the
	// goroutine did it.
	work    func()
	claimed atomic.Bool
	done    chan struct{}
	told    chan struct{} // if not nil, told when a goroutine has done work
	// f looks up the words read (collect): the pointers into blocks,
	// hits, or err if the process could not be read.
	f     finder
	hits  []hit
	inner []innerPtr // the pointers into interiors of hits
	err   error
	// cache is what the batch's last read ahead got, the memory at
	// cacheAt on (in mem's buffer, until it reads again).
	cache   []byte
	cacheAt uint64
}

// fromCache reports whether the blocks of bb are all in its cache, and
// makes them bb's if so.
func (bb *blockBatch) fromCache() bool {
	if bb.cache == nil {
		return false
	}
	end := bb.cacheAt + uint64(len(bb.cache))
	for _, b := range bb.items {
		if b.addr < bb.cacheAt || b.addr+b.size&^7 > end {
			return false
		}
	}
	bb.los, bb.his, bb.sizes = append(bb.los[:0], bb.cacheAt), append(bb.his[:0], end), append(bb.sizes[:0], end-bb.cacheAt)
	bb.buf, bb.ok = bb.cache, true
	return true
}

// readAhead reads bb's one block and ahead bytes from its start (back:
// up to its end), as much as can be read, into its cache.
func (bb *blockBatch) readAhead(ahead uint64, back bool) {
	b := bb.items[0]
	words := b.size &^ 7
	n := max(words, ahead)
	if uint64(cap(bb.mem.buf)) < n {
		bb.mem.buf = make([]byte, n)
	}
	at := b.addr
	if back && b.addr+words >= n {
		at = b.addr + words - n
	}
	if bb.readCache(at, n) || at != b.addr && bb.readCache(b.addr, n) {
		bb.fromCache()
		return
	}
	bb.cache, bb.ok = nil, false
}

// readCache reads n bytes at addr, or as many as can be read, into bb's
// cache, and reports whether they hold its one block.
func (bb *blockBatch) readCache(addr, n uint64) bool {
	b := bb.items[0]
	buf := bb.mem.buf[:n]
	got, err := unix.ProcessVMReadv(bb.mem.pid, []unix.Iovec{{Base: &buf[0], Len: n}}, []unix.RemoteIovec{{Base: uintptr(addr), Len: int(n)}}, 0)
	if err != nil || addr+uint64(got) < b.addr+b.size&^7 {
		return false
	}
	bb.cache, bb.cacheAt = buf[:got], addr
	return true
}

// plan joins bb's blocks into ranges to read: those less than rangeGap
// apart, as long as the bytes between blocks read stay within gapBudget.
func (bb *blockBatch) plan() {
	bb.los, bb.his, bb.sizes = bb.los[:0], bb.his[:0], bb.sizes[:0]
	var gaps uint64
	for _, b := range bb.items {
		end := b.addr + b.size&^7
		if n := len(bb.los); n > 0 && b.addr <= bb.his[n-1]+rangeGap && gaps <= gapBudget {
			if b.addr > bb.his[n-1] {
				gaps += b.addr - bb.his[n-1]
			}
			bb.his[n-1] = max(bb.his[n-1], end)
			continue
		}
		bb.los, bb.his = append(bb.los, b.addr), append(bb.his, end)
	}
	for i := range bb.los {
		bb.sizes = append(bb.sizes, bb.his[i]-bb.los[i])
	}
}

func (bb *blockBatch) read() {
	bb.cache = nil // its bytes are overwritten
	bb.buf, bb.ok = bb.mem.readBlocks(bb.los, bb.sizes)
}

// each calls f with the whole words of each block. A batch that could
// not be read in one call is read block by block, skipping the pages that
// cannot be read.
func (bb *blockBatch) each(f func(k int, b []byte)) error {
	if bb.ok {
		r, off := 0, uint64(0)
		for k, b := range bb.items {
			f(k, bb.inBuf(b, &r, &off))
		}
		return nil
	}
	for k, b := range bb.items {
		var words []byte
		err := bb.mem.words(b.addr, b.addr+b.size&^7, func(v uint64) {
			words = binary.LittleEndian.AppendUint64(words, v)
		})
		if err != nil {
			return err
		}
		f(k, words)
	}
	return nil
}

// scanMemory classifies the blocks of live in process pid, as its SCAN
// record sr says: its threads' stacks are in use from their stack
// pointers up (the exiting thread's and those stopped for the scan), and
// the agent's own mappings are no roots.
//
//  1. Number the live blocks in address order (blockIndex), for a state
//     of a byte each.
//  2. Scan the roots: a pointer to a block's start makes it reachable,
//     one into its interior possibly lost.
//  3. Mark from there, as memcheck does: a start pointer from a reachable
//     block makes reachable; any other pointer makes an unreached block
//     possibly lost (a start pointer from a possibly lost block too).
//     In 2 and 3, a pointer into a block's interior that one of
//     memcheck's heuristics accepts (a C++ array, string or base object,
//     leakheuristics.go) counts as a start pointer. The outcome is the
//     same in whatever order blocks are scanned (a block is scanned again
//     when its state rises), so they are read in batches by address.
//  4. What is left unreached is lost. In address order, each block still
//     unreached leads a group: the unreached blocks it reaches, by any
//     pointer, are indirectly lost and hang from it; a leader reached from
//     a later group joins that group, with its own. So in a lost cycle
//     the block of lowest address is definitely lost and the rest
//     indirectly. Only the lost blocks are read again for this, and only
//     their pointers to each other kept.
func scanMemory(pid int, live *liveSet, sr scanRecord, agentPath string) (*scanResult, error) {
	ix := newBlockIndex(&live.blocks)
	if ix.count() >= math.MaxUint32 {
		return nil, fmt.Errorf("%d live blocks: more than the scan can number", ix.count())
	}
	ms, err := readMaps(pid)
	if err != nil {
		return nil, err
	}
	mem := &processMemory{pid: pid}
	m := newMarker(pid, ix, ms)
	for _, rg := range rootRanges(ms, ix, mem, sr, agentPath) {
		m.scanRange(rg[0], rg[1], true)
	}
	m.drain()
	if m.err != nil {
		return nil, m.err
	}
	return classify(ix, m.state, mem)
}

// newMarker returns a marker of the blocks of ix in process pid, whose
// mappings are ms, with every block unreached.
func newMarker(pid int, ix *blockIndex, ms []mapping) *marker {
	m := &marker{
		ix:    ix,
		heur:  &heuristics{mem: &processMemory{pid: pid}, maps: ms, vtables: map[uint64]bool{}},
		state: pages.Slice[uint8](ix.count(), ix.count()),
		pid:   pid,
	}
	m.batches, m.read = make([]blockBatch, max(inflightBatches, 1)), make(chan struct{}, 1)
	for i := range m.batches {
		m.batches[i].mem, m.batches[i].f.ix, m.batches[i].told = &processMemory{pid: pid}, ix, m.read
	}
	m.windows = make([]blockBatch, max(inflightBatches, 1))
	for i := range m.windows {
		m.windows[i].mem, m.windows[i].f.ix = &processMemory{pid: pid}, ix
	}
	fill(m.state, unreached)
	return m
}

// fill sets every byte of s to v, copying what is set so far onto the
// rest: the scan's state has a byte for each of millions of blocks, and a
// loop a byte at a time, on the scan's own goroutine, holds the program
// for longer.
func fill(s []uint8, v uint8) {
	if len(s) == 0 {
		return
	}
	s[0] = v
	for n := 1; n < len(s); n *= 2 {
		copy(s[n:], s[:n])
	}
}

// classify groups the lost blocks (step 4 of scanMemory) and counts the
// classes.
func classify(ix *blockIndex, state []uint8, mem *processMemory) (*scanResult, error) {
	res := &scanResult{}
	var notReached []scanItem // the blocks not reachable, in increasing order of address; definite if lost
	var lost []scanItem
	add := func(num uint32, addr, size uint64) {
		switch state[num] {
		case reachable:
			res.bytes[trace.StillReachable] += size
			res.blocks[trace.StillReachable]++
		case unreached:
			lost = append(lost, scanItem{addr: addr, size: size})
			notReached = append(notReached, scanItem{addr: addr, size: size, definite: true})
		default:
			notReached = append(notReached, scanItem{addr: addr, size: size})
		}
	}
	if len(ix.odd) > 0 {
		ix.each(0, math.MaxUint64, add)
	} else {
		// Most pages of a big heap hold only reachable blocks: their
		// sizes are summed without the addresses, a part of the pages
		// on each CPU; the other pages are gone through in order.
		type part struct {
			bytes, blocks uint64
			others        []uint32
		}
		t, parts := ix.t, make([]part, min(runtime.GOMAXPROCS(0), 4))
		var wg sync.WaitGroup
		for i := range parts {
			pages := ix.pages[len(ix.pages)*i/len(parts) : len(ix.pages)*(i+1)/len(parts)]
			wg.Add(1)
			go func(pt *part) {
				defer wg.Done()
				for _, p := range pages {
					pg, base := t.at(p), ix.base[p]
					bytes, ok := reachableBytes(state[base:int(base)+len(pg.sizes)], pg.sizes)
					if !ok {
						pt.others = append(pt.others, p)
						continue
					}
					pt.bytes += bytes
					pt.blocks += uint64(len(pg.sizes))
				}
			}(&parts[i])
		}
		wg.Wait()
		for _, pt := range parts {
			res.bytes[trace.StillReachable] += pt.bytes
			res.blocks[trace.StillReachable] += pt.blocks
			for _, p := range pt.others {
				base := ix.base[p]
				t.eachInPage(p, func(r int, addr, size uint64) { add(base+uint32(r), addr, size) })
			}
		}
	}
	// The pointers of lost blocks to lost blocks, by their index in lost.
	edgeStart := make([]uint32, 0, len(lost)+1)
	var edges []uint32
	lostEdges := func(b []byte) {
		for w := uint64(0); w+8 <= uint64(len(b)); w += 8 {
			if num, start, _, ok := ix.find(wordAt(b, w)); ok && state[num] == unreached {
				t, _ := slices.BinarySearchFunc(lost, start, func(s scanItem, a uint64) int { return cmp.Compare(s.addr, a) })
				edges = append(edges, uint32(t))
			}
		}
	}
	for i := 0; i < len(lost); {
		if lost[i].size > scanWindow {
			// A lost block bigger than a window is read a window at a
			// time, as the mark reads a reachable one: its edges are
			// those of all its windows.
			edgeStart = append(edgeStart, uint32(len(edges)))
			for _, part := range windowsOf(lost[i]) {
				bb := &blockBatch{items: []scanItem{part}, mem: mem}
				bb.plan()
				bb.read()
				if err := bb.each(func(_ int, b []byte) { lostEdges(b) }); err != nil {
					return nil, err
				}
			}
			i++
			continue
		}
		j, bytes := i, uint64(0)
		for j < len(lost) && j-i < batchRanges && lost[j].size <= scanWindow && bytes+lost[j].size <= scanWindow {
			bytes += lost[j].size
			j++
		}
		bb := &blockBatch{items: lost[i:j], mem: mem}
		bb.plan()
		bb.read()
		err := bb.each(func(_ int, b []byte) {
			edgeStart = append(edgeStart, uint32(len(edges)))
			lostEdges(b)
		})
		if err != nil {
			return nil, err
		}
		i = j
	}
	edgeStart = append(edgeStart, uint32(len(edges)))
	lostState := make([]uint8, len(lost))
	for i := range lostState {
		lostState[i] = unreached
	}
	leader := make([]int32, len(lost))
	var stack []int
	for l := range lostState {
		if lostState[l] != unreached {
			continue
		}
		stack = append(stack[:0], l)
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, t := range edges[edgeStart[i]:edgeStart[i+1]] {
				if lostState[t] == unreached && int(t) != l {
					lostState[t], leader[t] = indirect, int32(l)
					stack = append(stack, int(t))
				}
			}
		}
	}
	k := 0 // the next of lost
	for _, b := range notReached {
		class, lb := trace.PossiblyLost, trace.LeakBlock{Addr: b.addr}
		if b.definite {
			if class = trace.LeakClass(lostState[k]); class == trace.IndirectlyLost {
				lb.Leader = lost[finalLeader(leader, lostState, k)].addr
			}
			k++
		}
		lb.Class = class
		res.bytes[class] += b.size
		res.blocks[class]++
		res.lost = append(res.lost, lb)
	}
	return res, nil
}

// windowsOf returns block b in parts of at most a window, in order: the
// scan reads no more than a window at once, however big a block is.
// scanWindow is a multiple of 8, so each part's words are the block's.
func windowsOf(b scanItem) []scanItem {
	parts := make([]scanItem, 0, (b.size+scanWindow-1)/scanWindow)
	for off := uint64(0); off < b.size; off += scanWindow {
		parts = append(parts, scanItem{addr: b.addr + off, size: min(scanWindow, b.size-off), definite: b.definite})
	}
	return parts
}

// reachableBytes returns the bytes of the blocks of a page, their states
// and sizes, and true, if they are all reachable and of sizes below
// bigBlock (so sizes holds them). The states are compared eight at a
// time: on a big heap most pages hold only reachable blocks.
func reachableBytes(states []uint8, sizes []uint16) (uint64, bool) {
	const all = reachable * 0x0101010101010101
	for len(states) >= 8 {
		if binary.LittleEndian.Uint64(states) != all {
			return 0, false
		}
		states = states[8:]
	}
	for _, st := range states {
		if st != reachable {
			return 0, false
		}
	}
	var bytes uint64
	for _, size := range sizes {
		if size == bigBlock {
			return 0, false
		}
		bytes += uint64(size)
	}
	return bytes, true
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

// readBlocks reads ranges of memory (addresses and sizes) one after the
// other, batchRanges at a time; false if not all could be read.
func (m *processMemory) readBlocks(addrs, sizes []uint64) ([]byte, bool) {
	var total uint64
	for _, s := range sizes {
		total += s
	}
	if total == 0 {
		return nil, true
	}
	if uint64(cap(m.buf)) < total {
		m.buf = make([]byte, total)
	}
	b := m.buf[:total]
	var at uint64 // where in b the next call reads to
	for k := 0; k < len(addrs); {
		remote, bytes := m.remote[:0], uint64(0)
		for ; k < len(addrs) && len(remote) < batchRanges; k++ {
			if sizes[k] > 0 {
				remote = append(remote, unix.RemoteIovec{Base: uintptr(addrs[k]), Len: int(sizes[k])})
				bytes += sizes[k]
			}
		}
		m.remote = remote
		if bytes == 0 {
			continue
		}
		got, err := unix.ProcessVMReadv(m.pid, []unix.Iovec{{Base: &b[at], Len: bytes}}, remote, 0)
		if err != nil || uint64(got) != bytes {
			return b, false
		}
		at += bytes
	}
	return b, true
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
func rootRanges(ms []mapping, ix *blockIndex, mem *processMemory, sr scanRecord, agentPath string) [][2]uint64 {
	skip := mergeRanges(append(mallocRanges(ix, mem, ms), sr.own...))
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
				return fmt.Errorf("reading the process's memory through its thread %d: %w", m.pid, err)
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
