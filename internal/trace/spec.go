// Package trace defines memtrail's trace file format and holds its streaming
// Writer and Reader. It depends on nothing else in memtrail: the recorder
// writes traces with it, and analysis reads them with it.
//
// The format is specified in prose in docs/format.md; this file is the same
// specification in code, used by both the Writer and the Reader.
package trace

import (
	"encoding/binary"
	"fmt"
)

// Magic is the first eight bytes of every trace file.
const Magic = "memtrail"

// Version is the format version this package writes. It reads it and
// every version from minVersion: version 1 is version 2 without the stack
// in use (the stack-use column and the ThreadStack record).
const Version = 2

// minVersion is the oldest format version this package reads.
const minVersion = 1

// fileHeaderSize is the size of the fixed file header: magic, version u16,
// flags u16, reserved u32.
const fileHeaderSize = 16

// blockMagic starts every block ("MTBK" in little-endian byte order).
const blockMagic = 0x4b42544d

// blockHeaderSize is the size of a block header: magic u32, layout u8,
// three reserved bytes, stored length u32, raw length u32, CRC-32C u32.
const blockHeaderSize = 20

// maxBlockRaw bounds a block's decoded size, the sum of its streams' raw
// lengths; a header claiming more is corrupt. Writers end blocks long
// before this.
const maxBlockRaw = 64 << 20

// layoutStreams is the only block layout of version 1: the payload is a
// stream table.
const layoutStreams = 1

// The streams of a block, in the order of its stream table. Records holds
// the records; the others hold the events that its Events records announce,
// in columns: one value per event, or per event that has the field. Events
// have no time of their own: Time records among the records say when the
// time of the events that follow them moves on.
//
// The values of the varint columns (size to raw) are split: a column's
// stream holds the low seven bits of each value in a byte whose top bit
// says whether the value goes on, and the rest of those that do (value >>
// 7, as a uv) go to the column's tails stream. zstd's entropy coder has one
// table for all the bytes of a frame; apart, the low bytes and the rest of
// each column each get a table that fits them, which on the malloc-dense
// benchmark saves a tenth of the file.
const (
	streamRecords = iota // records, as in Kind
	streamOps            // u8 per event: op kind << 5 | api
	streamSize           // per alloc and realloc: size
	streamAddr           // per alloc and realloc: address code of the (new) address
	streamRef            // per free and realloc: reference code of the (old) address
	streamStack          // per event: zigzag stack delta
	streamRawAddr        // per address the codes escape to: zigzag delta from the previous one

	// The tails of column k, from streamSize to streamRawAddr, are in
	// stream k + tailStreams.
	tailStreams = streamRawAddr - streamSize + 1

	// Version 2 adds a column after the tails of the others, and its
	// tails after it, so that a block of version 1 is one of version 2
	// whose stack-use column is empty.
	streamStackUse      = streamRawAddr + tailStreams + 1 // per event: its stack-use code (see stackUseCode)
	streamStackUseTails = streamStackUse + 1
	numStreams          = streamStackUseTails + 1

	// numColumns is the number of varint columns.
	numColumns = tailStreams + 1
)

var streamNames = [numStreams]string{"records", "ops", "size", "addr", "ref", "stack", "raw",
	"size tails", "addr tails", "ref tails", "stack tails", "raw tails", "stack use", "stack use tails"}

// tailOf returns the tails stream of the varint column k.
func tailOf(k int) int {
	if k == streamStackUse {
		return streamStackUseTails
	}
	return k + tailStreams
}

// columnIndex numbers the varint columns from 0: streamSize to
// streamRawAddr, then streamStackUse.
func columnIndex(k int) int {
	if k == streamStackUse {
		return numColumns - 1
	}
	return k - streamSize
}

// columnStream is the stream of the varint column numbered i.
func columnStream(i int) int {
	if i == numColumns-1 {
		return streamStackUse
	}
	return streamSize + i
}

// MaxStackInUse bounds Event.StackInUse: no stack is as big (addresses
// have at most 57 bits), and the bound keeps every stack-use code within
// 64 bits.
const MaxStackInUse = 1<<56 - 1

// stackUseCode codes the stack in use of an event against its prediction
// (see stackUsePredictor): the difference, which is most often 0 or a
// multiple of 16, the stack's alignment at a call. A multiple of 16 is
// coded as its zigzagged sixteenth shifted left by one; any other
// difference as itself zigzagged, shifted left by one, with the low bit
// set. Both values are at most MaxStackInUse.
func stackUseCode(use, predicted uint64) uint64 {
	d := int64(use - predicted)
	if d%16 == 0 {
		return zigzag(d/16) << 1
	}
	return zigzag(d)<<1 | 1
}

// stackUseOf decodes a stack-use code against the prediction. (Codes the
// Writer makes give values up to MaxStackInUse; a reader takes any other
// code's value modulo 2^64.)
func stackUseOf(code, predicted uint64) uint64 {
	d := unzigzag(code >> 1)
	if code&1 == 0 {
		d *= 16
	}
	return predicted + d
}

// maxStreamTable is the most a stream table adds to the streams it holds:
// a count and numStreams stream headers, every varint at its longest.
const maxStreamTable = binary.MaxVarintLen64 + numStreams*(2*binary.MaxVarintLen64+1)

// Stream encodings.
const (
	encodingRaw  = 0 // stored as is
	encodingZstd = 1 // one zstd frame
)

// An op byte holds an event's op kind in its top three bits and its API in
// the other five. The op kinds are the event kinds less 0x10.
const (
	opShift = 5
	apiMask = 1<<opShift - 1

	opAlloc   = 1
	opFree    = 2
	opRealloc = 3
)

// opByte returns the op byte of an event of kind k and API a.
func opByte(k Kind, a API) byte { return byte(k-KindContext)<<opShift | byte(a) }

// Kind says what a record is. Kinds below KindFirstSkippable have a fixed
// grammar every reader of this version knows; kinds from KindFirstSkippable
// up to 0x7f are prefixed with their length so that older readers can skip
// them.
//
// KindAlloc, KindFree and KindRealloc are what Record.Kind says of a memory
// event. In the file, events are not records: they are stored in the
// columns of their block, and an Events record (kindEvents) in the records
// stream says where they come among the other records.
type Kind uint8

const (
	KindInvalid      Kind = 0x00
	KindInfo         Kind = 0x01 // facts about the recording as a whole; first record of the file
	KindProcessStart Kind = 0x02 // a process (one program image) began to be recorded
	KindProcessEnd   Kind = 0x03 // and how it ended
	KindThread       Kind = 0x04 // a thread of a process was first seen
	KindThreadEnd    Kind = 0x05 // a thread exited
	KindObject       Kind = 0x06 // an ELF file (executable or shared library)
	KindModule       Kind = 0x07 // an object mapped into a process
	KindModuleUnload Kind = 0x08 // a module was unmapped (dlclose)
	KindStackNode    Kind = 0x09 // one frame of the call-stack tree of a process
	KindString       Kind = 0x0a // an interned string
	KindSymbol       Kind = 0x0b // the source frames of one code address of an object
	KindObjectStatus Kind = 0x0c // how well an object could be symbolized
	KindContext      Kind = 0x10 // following events belong to this process and thread
	KindAlloc        Kind = 0x11 // event: a block was allocated
	KindFree         Kind = 0x12 // event: a block was released
	KindRealloc      Kind = 0x13 // event: a block was resized or moved
	KindLost         Kind = 0x14 // events of a process are known to be missing
	KindFork         Kind = 0x15 // a process forked: the child starts with a copy of its heap
	KindTime         Kind = 0x16 // following events are later by this many time units
	KindThreadStack  Kind = 0x17 // a thread's deepest stack use (version 2)
	KindEnd          Kind = 0x1f // the trace was completed; last record of the file

	KindFirstSkippable Kind = 0x40
	KindType           Kind = 0x40 // skippable: a named type of an object's program, and its size
	KindStackCalls     Kind = 0x41 // skippable: a thread's stack at its function entries and returns
	KindDeepestStack   Kind = 0x42 // skippable: the call stack at a thread's deepest function entry
	KindLeakScan       Kind = 0x43 // skippable: the leak classes of a process's blocks at its normal exit
	KindLeakBlocks     Kind = 0x44 // skippable: the class of each lost block of a LeakScan
	KindLeakOrigins    Kind = 0x45 // skippable: the frees that dropped pointers to definitely lost blocks
	KindWarning        Kind = 0x46 // skippable: what the recorder could not record of a process, and why
	kindLastSkippable  Kind = 0x7f
)

// kindEvents is the record that says the next events of the block's columns
// come here. It shares its value with KindAlloc, which only Records carry:
// in the file, 0x12 and 0x13 are not record kinds, and 0x11 is this one.
const kindEvents Kind = 0x11

// wireName names a kind as it appears in a block's records stream.
func wireName(k Kind) string {
	switch k {
	case kindEvents:
		return "events"
	case KindFree, KindRealloc:
		return fmt.Sprintf("kind(0x%02x)", uint8(k))
	}
	return k.String()
}

var kindNames = map[Kind]string{
	KindInfo: "info", KindProcessStart: "process-start", KindProcessEnd: "process-end",
	KindThread: "thread", KindThreadEnd: "thread-end", KindObject: "object",
	KindModule: "module", KindModuleUnload: "module-unload", KindStackNode: "stack-node",
	KindString: "string", KindSymbol: "symbol", KindObjectStatus: "object-status",
	KindContext: "context", KindAlloc: "alloc", KindFree: "free", KindRealloc: "realloc",
	KindLost: "lost", KindFork: "fork", KindTime: "time", KindEnd: "end", KindType: "type",
	KindThreadStack: "thread-stack", KindStackCalls: "stack-calls", KindDeepestStack: "deepest-stack",
	KindLeakScan: "leak-scan", KindLeakBlocks: "leak-blocks", KindLeakOrigins: "leak-origins",
	KindWarning: "warning",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind(0x%02x)", uint8(k))
}

// IsEvent reports whether records of kind k are memory events.
func (k Kind) IsEvent() bool { return k == KindAlloc || k == KindFree || k == KindRealloc }

// API says which allocator entry point an event went through. The format
// has room for 32 of them.
type API uint8

const (
	APIUnknown API = iota
	APIMalloc
	APICalloc
	APIRealloc
	APIReallocArray
	APIFree
	APIPosixMemalign
	APIAlignedAlloc
	APIMemalign
	APIValloc
	APIPvalloc
	APINew                     // operator new(size_t)
	APINewNothrow              // operator new(size_t, nothrow_t const&)
	APINewAligned              // operator new(size_t, align_val_t)
	APINewAlignedNothrow       // operator new(size_t, align_val_t, nothrow_t const&)
	APINewArray                // operator new[](size_t)
	APINewArrayNothrow         // operator new[](size_t, nothrow_t const&)
	APINewArrayAligned         // operator new[](size_t, align_val_t)
	APINewArrayAlignedNothrow  // operator new[](size_t, align_val_t, nothrow_t const&)
	APIDelete                  // operator delete(void*)
	APIDeleteSized             // operator delete(void*, size_t)
	APIDeleteAligned           // operator delete(void*, align_val_t)
	APIDeleteSizedAligned      // operator delete(void*, size_t, align_val_t)
	APIDeleteNothrow           // operator delete(void*, nothrow_t const&)
	APIDeleteAlignedNothrow    // operator delete(void*, align_val_t, nothrow_t const&)
	APIDeleteArray             // operator delete[](void*)
	APIDeleteArraySized        // operator delete[](void*, size_t)
	APIDeleteArrayAligned      // operator delete[](void*, align_val_t)
	APIDeleteArraySizedAligned // operator delete[](void*, size_t, align_val_t)
	APIDeleteArrayNothrow      // operator delete[](void*, nothrow_t const&)
	APIDeleteArrayAlignedNothrow
	// APILost marks a free that the program made but the trace did not
	// see: the allocator gave the block's address to a new block while
	// the block was live in the trace. The Go Writer writes such a free
	// just before the allocation, so that readers know which block the
	// allocation replaced without looking its address up.
	APILost
	apiCount
)

var apiNames = [apiCount]string{
	APIUnknown: "unknown", APIMalloc: "malloc", APICalloc: "calloc", APIRealloc: "realloc",
	APIReallocArray: "reallocarray", APIFree: "free", APIPosixMemalign: "posix_memalign",
	APIAlignedAlloc: "aligned_alloc", APIMemalign: "memalign", APIValloc: "valloc", APIPvalloc: "pvalloc",
	APINew: "operator new", APINewNothrow: "operator new(nothrow)", APINewAligned: "operator new(align)",
	APINewAlignedNothrow: "operator new(align, nothrow)", APINewArray: "operator new[]",
	APINewArrayNothrow: "operator new[](nothrow)", APINewArrayAligned: "operator new[](align)",
	APINewArrayAlignedNothrow: "operator new[](align, nothrow)", APIDelete: "operator delete",
	APIDeleteSized: "operator delete(sized)", APIDeleteAligned: "operator delete(align)",
	APIDeleteSizedAligned: "operator delete(sized, align)", APIDeleteNothrow: "operator delete(nothrow)",
	APIDeleteAlignedNothrow: "operator delete(align, nothrow)", APIDeleteArray: "operator delete[]",
	APIDeleteArraySized: "operator delete[](sized)", APIDeleteArrayAligned: "operator delete[](align)",
	APIDeleteArraySizedAligned: "operator delete[](sized, align)", APIDeleteArrayNothrow: "operator delete[](nothrow)",
	APIDeleteArrayAlignedNothrow: "operator delete[](align, nothrow)", APILost: "lost free",
}

func (a API) String() string {
	if a < apiCount {
		return apiNames[a]
	}
	return fmt.Sprintf("api(%d)", uint8(a))
}

// Valid reports whether a is a known API.
func (a API) Valid() bool { return a < apiCount }

// Family groups APIs whose blocks may be released by each other: a block
// from new[] must be released by delete[], one from malloc by free.
type Family uint8

const (
	FamilyUnknown  Family = iota
	FamilyMalloc          // malloc, calloc, realloc, memalign, ... / free, realloc
	FamilyNew             // operator new / operator delete
	FamilyNewArray        // operator new[] / operator delete[]
)

func (f Family) String() string {
	switch f {
	case FamilyMalloc:
		return "malloc"
	case FamilyNew:
		return "new"
	case FamilyNewArray:
		return "new[]"
	}
	return "unknown"
}

// Family returns the family of a.
func (a API) Family() Family {
	switch {
	case a >= APIMalloc && a <= APIPvalloc:
		return FamilyMalloc
	case a >= APINew && a <= APINewAlignedNothrow, a >= APIDelete && a <= APIDeleteAlignedNothrow:
		return FamilyNew
	case a >= APINewArray && a <= APINewArrayAlignedNothrow, a >= APIDeleteArray && a <= APIDeleteArrayAlignedNothrow:
		return FamilyNewArray
	}
	return FamilyUnknown
}

// EndHow says how a process ended.
type EndHow uint8

const (
	EndUnknown  EndHow = iota // the recorder lost sight of it without learning how
	EndExited                 // it called exit; Code is the exit status
	EndSignaled               // it was killed by signal Code
	EndExec                   // it replaced its image with exec; the new image is a new process
	EndRunning                // it was still running when recording stopped
	// EndExecUnrecorded: it replaced its image with exec, and the new
	// image was not recorded; Code says why, if the agent knew
	// (UnrecordedUnknown, UnrecordedStatic).
	EndExecUnrecorded
)

// Why a process's new image was not recorded: the Code of a ProcessEnd
// with EndExecUnrecorded. Traces written before the agent could tell
// have 0 there.
const (
	// UnrecordedUnknown: the loader dropped the agent, as it does for
	// a setuid or setgid program.
	UnrecordedUnknown int64 = 0
	// UnrecordedStatic: the new program, or its script's interpreter,
	// is statically linked, so the loader never ran to preload the
	// agent.
	UnrecordedStatic int64 = 1
)

func (h EndHow) String() string {
	switch h {
	case EndExited:
		return "exited"
	case EndSignaled:
		return "killed by signal"
	case EndExec:
		return "replaced by exec"
	case EndRunning:
		return "still running when recording stopped"
	case EndExecUnrecorded:
		return "exec'd without memtrail"
	}
	return "unknown"
}

// Signal names the signal n of a process's end (EndSignaled's Code):
// "signal 9 (SIGKILL)". The numbers in a trace are those of Linux on the
// machine it was recorded on, not of the one reading it.
func Signal(n int64) string {
	if name, ok := signalNames[n]; ok {
		return fmt.Sprintf("signal %d (%s)", n, name)
	}
	return fmt.Sprintf("signal %d", n)
}

// signalNames are the names of Linux's signals, by number.
var signalNames = map[int64]string{
	1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS",
	8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE",
	14: "SIGALRM", 15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP",
	20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ",
	26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS",
}

// SymbolStatus says how well an object could be symbolized.
type SymbolStatus uint8

const (
	SymbolsFull     SymbolStatus = iota // functions, files and lines
	SymbolsNoDebug                      // function names only: no DWARF found
	SymbolsMissing                      // the file could not be read
	SymbolsMismatch                     // the file's build-id differs from the one that ran
	SymbolsStripped                     // neither DWARF nor a symbol table for most addresses
)

func (s SymbolStatus) String() string {
	switch s {
	case SymbolsFull:
		return "full"
	case SymbolsNoDebug:
		return "no debug info"
	case SymbolsMissing:
		return "file missing"
	case SymbolsMismatch:
		return "build-id mismatch"
	case SymbolsStripped:
		return "stripped"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Segment flags, as in ELF program headers.
const (
	SegmentExec  = 1
	SegmentWrite = 2
	SegmentRead  = 4
)

// Info describes the recording as a whole.
type Info struct {
	StartUnixNano int64    // wall-clock time of time zero
	TimeUnit      uint64   // nanoseconds per unit of event time (>= 1)
	Hostname      string   //
	Recorder      string   // name and version of the program that wrote the trace
	MaxFrames     uint64   // the call-stack depth limit the agent used
	Command       []string // the command line that was recorded
}

// Process is one program image: a fork starts a new process, and so does an
// exec (the pid stays, the image changes).
type Process struct {
	ID     uint64 // trace-local, from 1
	PID    uint64
	PPID   uint64
	Parent uint64 // ID of the parent process in this trace, 0 if none
	Time   uint64 // ns since time zero
	Exe    string
	Args   []string
	Cwd    string
}

// ProcessEnd says how a process ended.
type ProcessEnd struct {
	ID   uint64
	Time uint64
	How  EndHow
	Code int64 // exit status or signal number
	Lost uint64
}

// Thread is a thread of a process. Index is what events refer to.
type Thread struct {
	Process uint64
	Index   uint64 // from 1 within its process
	TID     uint64
	Time    uint64
}

// Object is an ELF file, identified within the trace by ID.
type Object struct {
	ID      uint64 // from 1
	Path    string
	BuildID []byte
}

// Segment is one PT_LOAD segment of a module.
type Segment struct {
	Vaddr  uint64 // link-time virtual address
	Memsz  uint64
	Offset uint64 // file offset
	Flags  uint64 // SegmentRead|SegmentWrite|SegmentExec
}

// ThreadEnd says a thread of a process exited.
type ThreadEnd struct {
	Process uint64
	Index   uint64
	Time    uint64
}

// ThreadStack is the high-water mark of a thread's stack: the most bytes
// of it ever in use, from its base (its highest address) down to the
// deepest byte the thread wrote, which may have been between two of its
// events. The agent finds it by painting the stack (see README.md) as the
// thread ends or its process exits; a thread without one has only the
// stack in use at its events.
type ThreadStack struct {
	Process   uint64
	Index     uint64 // the thread
	Time      uint64 // ns since time zero, when it was measured
	HighWater uint64 // bytes
	Size      uint64 // bytes the stack may grow to; 0 if not known
}

// StackCalls is what a thread's stack did at its function entries and
// returns, in a program built with gcc's -finstrument-functions and
// recorded with memtrail run -stack-calls: the stack in use at each of them
// (the stack's base minus the stack pointer of the function entered or
// returning, its frame included) is not written, only its highest value
// and its latest since the thread's previous StackCalls record. The agent
// writes one for each time unit in which the thread made calls.
type StackCalls struct {
	Process uint64
	Thread  uint64 // the thread's index in its process
	Time    uint64 // ns since time zero: the latest entry or return counted
	Max     uint64 // the most stack in use at an entry or return counted, in bytes
	Level   uint64 // the stack in use at the latest of them, in bytes
	Calls   uint64 // how many entries and returns the record counts
}

// DeepestStack is the call stack of a thread at its deepest function entry
// (see StackCalls): Bytes of stack in use at Time, in the stack Stack (a
// StackNode ID of the process), whose innermost frame is the function
// entered. FrameSizes gives each frame's share of Bytes, innermost first:
// the stack in use in that frame minus the stack in use in its caller,
// the outermost frame's counted from the stack's base; a stack cut short
// by the depth limit has fewer sizes than Bytes needs. A thread may have
// several; the deepest counts.
type DeepestStack struct {
	Process    uint64
	Thread     uint64
	Time       uint64 // ns since time zero
	Bytes      uint64
	Stack      uint64
	FrameSizes []uint64
}

// LeakScan is what the recorder found when it scanned a process's memory
// at its normal exit for the blocks still allocated, classified as
// valgrind's memcheck does (see README.md): a block is still reachable if
// a chain of pointers to block starts leads to it from a root (writable
// data of the loaded objects, the threads' stacks and registers);
// possibly lost if only chains with a pointer into a block's interior
// do; indirectly lost if only lost blocks point to it; definitely lost
// if nothing does. A process has at most one. With Error set the scan
// failed, and the counts are 0.
//
// The LeakBlocks records that follow it name the lost blocks (definitely,
// indirectly or possibly); every other block allocated at exit is still
// reachable.
type LeakScan struct {
	Process  uint64
	Time     uint64 // ns since time zero, when the scan began
	Duration uint64 // ns it took, the process held at its exit
	Error    string // why there is no classification; "" if there is

	DefinitelyLostBytes, DefinitelyLostBlocks uint64
	IndirectlyLostBytes, IndirectlyLostBlocks uint64
	PossiblyLostBytes, PossiblyLostBlocks     uint64
	StillReachableBytes, StillReachableBlocks uint64
}

// Warning is the recorder's warning that part of what process Process did
// is not in the trace, as it told the user when it recorded it: Message is
// one sentence, without the process's name. A process has any number.
type Warning struct {
	Process uint64
	Message string
}

// LeakClass is the class of a block allocated at exit.
type LeakClass uint8

const (
	StillReachable LeakClass = 0 // never written: a block a LeakBlocks record does not name
	DefinitelyLost LeakClass = 1
	IndirectlyLost LeakClass = 2
	PossiblyLost   LeakClass = 3
)

func (c LeakClass) String() string {
	switch c {
	case StillReachable:
		return "still reachable"
	case DefinitelyLost:
		return "definitely lost"
	case IndirectlyLost:
		return "indirectly lost"
	case PossiblyLost:
		return "possibly lost"
	}
	return fmt.Sprintf("leak class %d", uint8(c))
}

// LeakBlocks names lost blocks of a process's LeakScan, by address, in
// increasing order within a record. A scan of many lost blocks writes
// several, each at most MaxLeakBlocks long, so that none fills a block of
// the file.
type LeakBlocks struct {
	Process uint64
	Blocks  []LeakBlock
}

// MaxLeakBlocks is the most blocks the Writer puts in one LeakBlocks
// record: about 400 KiB at most.
const MaxLeakBlocks = 1 << 16

// LeakBlock is the class of one block allocated at exit. An indirectly
// lost block also names the definitely lost block whose chain it hangs
// from (Leader, an address of the same scan); 0 for the other classes.
type LeakBlock struct {
	Addr   uint64
	Class  LeakClass
	Leader uint64
}

// LeakOrigins says where the leak of definitely lost blocks of a
// process's LeakScan was made: for each, the last free of a block that
// held a pointer to its start (memtrail run -leak-origins). A lost block
// that no freed block pointed to is not named: its last pointer was
// overwritten or went out of scope instead. A process recorded that way
// has LeakOrigins records after its LeakBlocks (one, empty, if it names
// no block); others have none. Blocks are in increasing order of address
// within a record, at most MaxLeakBlocks a record.
type LeakOrigins struct {
	Process uint64
	Origins []LeakOrigin
}

// LeakOrigin is the last free of a block (Parent) that pointed to the
// definitely lost block at Addr, made at Time by Thread from Stack.
type LeakOrigin struct {
	Addr   uint64
	Parent uint64
	Time   uint64
	Thread uint64
	Stack  uint64
}

// Module is an object mapped into a process at Base (the load bias: a
// runtime address minus Base is the object's link-time virtual address).
type Module struct {
	Process  uint64
	ID       uint64 // per process, from 1, never reused
	Object   uint64
	Base     uint64
	Time     uint64
	Segments []Segment
}

// ModuleUnload says a module is no longer mapped.
type ModuleUnload struct {
	Process uint64
	ID      uint64
	Time    uint64
}

// StackNode is one node of a process's call-stack tree. A stack is named by
// its innermost node; following Parent leads outwards to the root (0). Offset
// is the return address minus the module's Base. A node of module
// ModuleCut is no frame: it is the root of a stack deeper than
// Info.MaxFrames, under which its innermost frames were recorded, and its
// Offset is how many frames were left out (0 if not known).
type StackNode struct {
	Process uint64
	ID      uint64 // from 1 within its process
	Parent  uint64
	Module  uint64
	Offset  uint64
}

// ModuleCut is the module of the StackNode that stands for the frames of a
// stack beyond the depth limit. Modules count from 1.
const ModuleCut = 0

// String is an interned string used by Symbol records.
type String struct {
	ID    uint64 // from 1
	Value string
}

// Frame is one source-level frame. In a Symbol, Frames[0] is the innermost
// (possibly inlined) function and the last frame is the real function the
// address belongs to.
type Frame struct {
	Function uint64 // String ID; 0 if unknown
	File     uint64 // String ID; 0 if unknown
	Line     uint64
}

// Symbol gives the source frames of the return address Offset of an object
// (symbolized at Offset-1, inside the call instruction).
type Symbol struct {
	Object uint64
	Offset uint64
	Frames []Frame
}

// ObjectStatus says how well an object could be symbolized, and why.
type ObjectStatus struct {
	Object  uint64
	Status  SymbolStatus
	Message string
}

// Type is a named type of the program an object holds, with its size, as
// the object's debug info describes it: a block of Size bytes may be one.
// An object may have several types of one size, and a name may come with
// several sizes (compilation units that define it differently).
type Type struct {
	Object uint64
	Size   uint64 // in bytes
	Name   string // a struct, class, union or typedef name, qualified in C++ ("ns::Shape")
}

// Event is a memory event. Addr is the block's address (the new address for
// a realloc); OldAddr is the address a realloc was given; Size is the
// requested size (0 for frees). Thread is the thread index of its process.
//
// Handle, OldHandle and Block tell the Reader's events apart without their
// addresses, so that a caller can keep the blocks of a trace in a table by
// handle rather than in a map by address. They are what the predictors of
// the block the event was decoded from know (docs/format.md, Block state):
// the Writer ignores them.
//
//   - Block numbers the sound blocks of the file from 1, in order: the
//     events of one block have the same Block, those of another a
//     different one.
//   - Handle is, for an alloc or a realloc, the handle number its block
//     got: from 1, unique among the live blocks of its process in its
//     Block, and given again once that block is released. For a free, it
//     is the handle of the block it releases (and OldHandle of a realloc,
//     that of its old block) if the trace names the block by its handle,
//     else 0. The Go writer does whenever the block was allocated in the
//     same Block by the same process: 0 says that the block comes from an
//     earlier block of the trace (a fork child's blocks from its parent's
//     included) or from before the trace. A realloc that has an OldHandle
//     has the same Handle: its block keeps its number.
//
// Handles are comparable only between events with the same Process and
// Block. A handle names a block from its allocation to its release even if
// another block is allocated at the same address in between (its free was
// lost): a free of that address then names the handle given last. The Go
// Writer lets that happen to no block: before such an allocation, it
// writes a free of the old block, of API APILost.
type Event struct {
	Kind Kind // KindAlloc, KindFree or KindRealloc
	API  API
	// Handle, OldHandle and Block come here, before the 64-bit fields, to
	// fill the room there: the Reader hands out events in arrays.
	Handle    uint32
	OldHandle uint32
	Block     uint32
	Process   uint64
	Thread    uint64
	Time      uint64 // ns since time zero, rounded down to Info.TimeUnit; never decreasing
	Addr      uint64
	OldAddr   uint64
	Size      uint64
	Stack     uint64 // StackNode ID of its process; 0 if no stack was taken
	// StackInUse is how many bytes of its thread's stack were in use at
	// the allocator call: the stack's base minus the caller's stack
	// pointer. 0 if it was not measured (a trace of version 1, or a
	// thread running on another stack). A free of API APILost that the
	// Writer adds has the value of its thread's event before it.
	StackInUse uint64
}

// Lost says that Count events of a process are known to be missing.
type Lost struct {
	Process uint64
	Count   uint64
	Reason  string
}

// LostRegionDamaged begins the Reason of the Lost record of a process that
// damaged the memory it shared with the recorder (a wild write of the
// program): the recorder stopped reading it there, so the process's
// history ends at the damage, and Count is how many operations the agent
// said it made after it, if it could say.
const LostRegionDamaged = "memtrail's buffer in the process was damaged"

// LostInFlight is the Reason of the Lost record of operations that had
// begun when their process ended and never reached the recorder: they come
// after every event of the process in the trace, so no event of the trace
// depends on them.
const LostInFlight = "operations in flight when the process ended"

// LostOwnAllocator is the Reason of the Lost record, of Count 0, that
// comes first in the history of a process recorded through its own
// allocation functions, patched at its start (as memtrail run does
// unless given -patch-own-allocator=false): how many operations were not seen is unknown,
// and they may come before any of its events.
const LostOwnAllocator = "blocks the program's own allocator gave out before memtrail patched it at the program's start, or through functions it does not export, are not seen"

// Fork marks the point in a process's history at which it forked. The
// child (a process whose ProcessStart comes after this record) starts with
// a copy of the parent's heap as of here: its blocks are live in the child
// too, and — as valgrind counts — the child's totals start from the
// parent's.
type Fork struct {
	Process uint64 // the parent
	Child   uint64 // the child's process ID in this trace
	Time    uint64 // ns since time zero
}

// End is the last record of a completed trace.
type End struct {
	Time   uint64 // ns since time zero
	Events uint64 // memory events written
}

// Record is one record of a trace as the Reader returns it and the Writer's
// Write method takes it. Kind says which field is set: Event for memory
// events (a value, so that reading events allocates nothing), otherwise the
// one pointer field of that kind's type. Context and Time records never
// appear here: the Reader folds them into the Process, Thread and Time of
// the events.
type Record struct {
	Kind  Kind
	Event Event

	Info         *Info
	Process      *Process // KindProcessStart
	ProcessEnd   *ProcessEnd
	Thread       *Thread
	ThreadEnd    *ThreadEnd
	Object       *Object
	Module       *Module
	ModuleUnload *ModuleUnload
	StackNode    *StackNode
	String       *String
	Symbol       *Symbol
	ObjectStatus *ObjectStatus
	Type         *Type
	Lost         *Lost
	Fork         *Fork
	ThreadStack  *ThreadStack
	StackCalls   *StackCalls
	DeepestStack *DeepestStack
	LeakScan     *LeakScan
	LeakBlocks   *LeakBlocks
	LeakOrigins  *LeakOrigins
	Warning      *Warning
	End          *End
}
