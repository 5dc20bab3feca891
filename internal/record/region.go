package record

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// region is the memory one recorded process shares with the recorder:
// header, ring control slots, rings and the call-stack node table.
type region struct {
	mem         []byte
	fd          int
	nslots      int
	ringSize    uint64 // of every slot's ring but slot 0's
	firstRing   uint64 // of slot 0's
	ringsOffset uint64
	nodesOffset uint64
	nodeCap     uint64
	clock       *coarseClock // the clock moving the header's on, if any
}

// regionConfig sizes a region. Pages are only backed when touched, so the
// rings and the node table cost memory in proportion to their use.
type regionConfig struct {
	slots     int    // thread slots (live threads at once)
	firstRing uint64 // bytes of slot 0's ring, a power of two
	ringSize  uint64 // bytes of the others'
	nodeCap   uint64 // call-stack nodes
	maxFrames int
	// callsWindow is mt_header.calls_window: 0, or the time-stamp
	// counter ticks of a time unit (Options.StackCalls).
	callsWindow  uint64
	leakScan     bool // mt_header.leak_scan
	freePointers bool // mt_header.free_pointers
	fullUnwind   bool // mt_header.full_unwind
}

func newRegion(cfg regionConfig, recorderPid int) (*region, error) {
	ringsOffset := alignUp(headerSize+uint64(cfg.slots)*slotBytes, 4096)
	nodesOffset := alignUp(ringsOffset+cfg.firstRing+uint64(cfg.slots-1)*cfg.ringSize, 4096)
	size := alignUp(nodesOffset+cfg.nodeCap*nodeBytes, 4096)
	fd, err := unix.MemfdCreate("memtrail", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("creating shared memory: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sizing shared memory: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mapping shared memory: %w", err)
	}
	r := &region{mem: mem, fd: fd, nslots: cfg.slots, ringSize: cfg.ringSize, firstRing: cfg.firstRing,
		ringsOffset: ringsOffset, nodesOffset: nodesOffset, nodeCap: cfg.nodeCap}
	*r.u64(hdrMagic) = regionMagic
	*r.u32(hdrVersion) = protocolVersion
	*r.u32(hdrNslots) = uint32(cfg.slots)
	*r.u64(hdrRegionSize) = size
	*r.u64(hdrRingSize) = cfg.ringSize
	*r.u64(hdrFirstRing) = cfg.firstRing
	*r.u64(hdrRingsOffset) = ringsOffset
	*r.u64(hdrNodesOffset) = nodesOffset
	*r.u64(hdrNodeCapacity) = cfg.nodeCap
	*r.u32(hdrMaxFrames) = uint32(cfg.maxFrames)
	*r.u32(hdrRecorderPid) = uint32(recorderPid)
	*r.u64(hdrCallsWindow) = cfg.callsWindow
	if cfg.leakScan {
		*r.u64(hdrLeakScan) = 1
	}
	if cfg.freePointers {
		*r.u64(hdrFreePointers) = 1
	}
	if cfg.fullUnwind {
		*r.u64(hdrFullUnwind) = 1
	}
	return r, nil
}

func alignUp(v, a uint64) uint64 { return (v + a - 1) &^ (a - 1) }

func (r *region) u64(off uint64) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[off])) }
func (r *region) u32(off uint64) *uint32 { return (*uint32)(unsafe.Pointer(&r.mem[off])) }

func (r *region) load64(off uint64) uint64 { return atomic.LoadUint64(r.u64(off)) }

func (r *region) slotOff(i int) uint64 { return headerSize + uint64(i)*slotBytes }

// ring returns the words of ring i.
func (r *region) ring(i int) []uint64 {
	if i == 0 {
		return unsafe.Slice((*uint64)(unsafe.Pointer(&r.mem[r.ringsOffset])), r.firstRing/8)
	}
	off := r.ringsOffset + r.firstRing + uint64(i-1)*r.ringSize
	return unsafe.Slice((*uint64)(unsafe.Pointer(&r.mem[off])), r.ringSize/8)
}

// node reads call-stack node id; ok is false for an id outside the table.
func (r *region) node(id uint64) (parent, module uint32, offset uint64, ok bool) {
	if id == 0 || id >= r.nodeCap || id > r.load64(hdrNodeCount) {
		return 0, 0, 0, false
	}
	off := r.nodesOffset + id*nodeBytes
	return *r.u32(off + nodeParent), *r.u32(off + nodeModule), *r.u64(off + nodeOffset), true
}

// wake wakes up to waiters threads of the process sleeping on the 32-bit
// futex at off.
func (r *region) wake(off uint64, waiters int) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(r.u32(off))), futexWake, uintptr(waiters), 0, 0, 0)
}

const futexWake = 1 // FUTEX_WAKE in linux/futex.h

// closeFD drops the recorder's descriptor once the agent has its own.
func (r *region) closeFD() {
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

func (r *region) unmap() {
	r.closeFD()
	if r.clock != nil {
		r.clock.remove(r)
		r.clock = nil
	}
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
}

// execPath is the program the process exec'd, as the agent noted it with
// execStatic (struct mt_header, exec_path): at most execPathBytes-1
// bytes, whatever the process wrote there.
func (r *region) execPath() string {
	b := r.mem[hdrExecPath : hdrExecPath+execPathBytes]
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
