package record

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/memtrail/memtrail/internal/symbolize"
	"github.com/memtrail/memtrail/internal/trace"
)

// symbolTable collects the code addresses the trace refers to, per object,
// and symbolizes them when the recording ends. Each file is opened when
// first seen, while the process still has it loaded: if it is deleted or
// replaced before the end (a plugin unloaded and rebuilt), the descriptor
// still reads the file that ran. Its debug info, which takes long to read
// (a fifth of a second for glibc's, compressed), is read in the background
// from the first time the trace refers to the object, by one goroutine on a
// thread of the lowest priority, so that it overlaps the program's run
// without stalling the recording loop; the addresses are looked up at the
// end.
//
// It also lists the named types of the program's objects (see wantTypes),
// read in the background too, for the trace's Type records.
type symbolTable struct {
	objects map[uint64]*objectSymbols
	order   []uint64
	strings map[string]uint64
	preload chan *objectSymbols // objects to open in the background
	// preloadDone says that preload is closed: the objects not sent are
	// opened at the end.
	preloadDone bool
}

// endPreload closes the preload channel, once.
func (t *symbolTable) endPreload() {
	if !t.preloadDone {
		t.preloadDone = true
		close(t.preload)
	}
}

type objectSymbols struct {
	path    string
	buildID []byte
	held    *os.File
	offsets map[uint64]struct{}
	symbols []trace.Symbol
	frames  [][]symbolize.Frame

	// queued says that the object went to the preload goroutine, which
	// closes opened once obj and openErr are set and it has looked up the
	// offsets wanted so far: wanted holds them until it takes them (and
	// sets taken), and early holds their frames.
	queued  bool
	opened  chan struct{}
	obj     *symbolize.Object
	openErr error
	mu      sync.Mutex
	wanted  []uint64
	taken   bool
	early   map[uint64][]symbolize.Frame

	// wantTypes says that the object's types go into the trace: set
	// under mu, since the preload goroutine reads it. types holds them
	// once typesRead.
	wantTypes bool
	typesRead bool
	types     []symbolize.Type
}

// preloadQueue bounds the objects waiting to be opened in the background;
// when it is full, the others are opened at the end.
const preloadQueue = 1024

// maxTypesPerObject bounds the types written for one object. A C program,
// even a big one, has a few hundred to a few thousand named types, and
// they all fit; a big C++ program's DWARF has tens of thousands, most of
// them template instantiations whose names run to hundreds of bytes. The
// bin table and the type guesses need a few names for each size, and the
// bound keeps such a program's Type records to a few hundred KiB of the
// trace: symbolize keeps the shortest names.
const maxTypesPerObject = 4096

func newSymbolTable() *symbolTable {
	t := &symbolTable{objects: map[uint64]*objectSymbols{}, strings: map[string]uint64{},
		preload: make(chan *objectSymbols, preloadQueue)}
	go preloadSymbols(t.preload)
	return t
}

// preloadSymbols opens the objects it is sent until the channel closes.
func preloadSymbols(objects <-chan *objectSymbols) {
	runtime.LockOSThread() // the thread keeps its low priority to itself
	unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19)
	for o := range objects {
		o.open()
		if o.obj != nil {
			o.mu.Lock()
			wanted, wantTypes := o.wanted, o.wantTypes
			o.wanted, o.taken = nil, true
			o.mu.Unlock()
			o.early = make(map[uint64][]symbolize.Frame, len(wanted))
			for _, off := range wanted {
				o.early[off] = o.lookup(off)
			}
			if wantTypes {
				o.readTypes()
			}
		}
		close(o.opened)
	}
}

// readTypes lists the object's types.
func (o *objectSymbols) readTypes() {
	o.types = o.obj.Types(maxTypesPerObject)
	o.typesRead = true
}

// lookup returns the source frames of the return address at offset.
func (o *objectSymbols) lookup(offset uint64) []symbolize.Frame {
	// The call is the instruction before the return address.
	return o.obj.Frames(offset - 1)
}

func (t *symbolTable) addObject(id uint64, path string, buildID []byte) {
	o := &objectSymbols{path: path, buildID: buildID, offsets: map[uint64]struct{}{}}
	o.held = openRegular(path)
	t.objects[id] = o
	t.order = append(t.order, id)
}

func (t *symbolTable) want(obj, offset uint64) {
	o := t.objects[obj]
	if o == nil {
		return
	}
	if _, seen := o.offsets[offset]; seen {
		return
	}
	o.offsets[offset] = struct{}{}
	if offset == 0 {
		return
	}
	t.queue(o)
	if o.queued {
		o.mu.Lock()
		if !o.taken {
			o.wanted = append(o.wanted, offset)
		}
		o.mu.Unlock()
	}
}

// wantTypes says that the types of object obj go into the trace. The
// recorder asks for those of the program's own objects (see
// Recorder.programObject): not those of the C library and its kin, whose
// hundreds of internal structs say nothing of the program, and whose DWARF
// would take longer to scan than most programs take to run.
func (t *symbolTable) wantTypes(obj uint64) {
	o := t.objects[obj]
	if o == nil {
		return
	}
	o.mu.Lock()
	o.wantTypes = true
	o.mu.Unlock()
	t.queue(o)
}

// queue sends o to be opened in the background, unless it went already,
// the preload goroutine is done, or its queue is full.
func (t *symbolTable) queue(o *objectSymbols) {
	if o.queued || t.preloadDone {
		return
	}
	o.opened = make(chan struct{})
	select {
	case t.preload <- o:
		o.queued = true
	default:
		o.opened = nil
	}
}

// systemLibraryDirs hold the system's libraries: the C library, the C++
// runtime and the other distribution packages a program links with.
var systemLibraryDirs = []string{"/lib/", "/lib32/", "/lib64/", "/libx32/",
	"/usr/lib/", "/usr/lib32/", "/usr/lib64/", "/usr/libx32/"}

// isSystemLibrary reports whether the object at path is one of the
// system's libraries, or the dynamic linker wherever it is. Libraries in
// /usr/local/lib, /opt or the program's own directories are not.
func isSystemLibrary(path string) bool {
	if strings.HasPrefix(filepath.Base(path), "ld-linux") {
		return true
	}
	for _, dir := range systemLibraryDirs {
		if strings.HasPrefix(path, dir) {
			return true
		}
	}
	return false
}

// resolve symbolizes every object's addresses, objects in parallel.
func (t *symbolTable) resolve() {
	var wg sync.WaitGroup
	work := make(chan *objectSymbols)
	for i := 0; i < runtime.NumCPU(); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				o.resolve()
			}
		}()
	}
	t.endPreload()
	for _, id := range t.order {
		work <- t.objects[id]
	}
	close(work)
	wg.Wait()
}

func (o *objectSymbols) open() {
	if fi, err := os.Stat(o.path); err == nil && !fi.Mode().IsRegular() {
		// No file a process maps; and a FIFO would hold the recorder
		// up until someone wrote to it.
		o.openErr = fmt.Errorf("%s is not a regular file", o.path)
	} else {
		o.obj, o.openErr = symbolize.Open(o.path, o.buildID)
	}
	if o.held == nil {
		return
	}
	if st, _ := statusOrMissing(o.obj, o.openErr); st == symbolize.Missing || st == symbolize.Mismatch {
		// The path no longer holds the file that ran: read the one
		// held open since it was loaded.
		if obj, err := symbolize.Open(fmt.Sprintf("/proc/self/fd/%d", o.held.Fd()), o.buildID); err == nil {
			if st, _ := obj.Status(); st != symbolize.Mismatch {
				if o.obj != nil {
					o.obj.Close()
				}
				o.obj, o.openErr = obj, nil
				return
			}
			obj.Close()
		}
	}
}

// openRegular opens path if it is a regular file, or returns nil. A
// module record names the file the process mapped, but a process can send
// any path: the open does not wait (O_NONBLOCK) for a FIFO's writer.
func openRegular(path string) *os.File {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil
	}
	return f
}

func statusOrMissing(obj *symbolize.Object, err error) (symbolize.Status, string) {
	if err != nil || obj == nil {
		return symbolize.Missing, fmt.Sprintf("the file could not be read (%v)", err)
	}
	return obj.Status()
}

func (o *objectSymbols) resolve() {
	if o.queued {
		<-o.opened
	} else {
		o.open()
	}
	if o.obj == nil {
		return
	}
	if o.wantTypes && !o.typesRead {
		o.readTypes()
	}
	if len(o.offsets) == 0 {
		return
	}
	offsets := make([]uint64, 0, len(o.offsets))
	for off := range o.offsets {
		offsets = append(offsets, off)
	}
	sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
	for _, off := range offsets {
		if off == 0 {
			continue
		}
		frames, ok := o.early[off]
		if !ok {
			frames = o.lookup(off)
		}
		if len(frames) == 0 {
			continue
		}
		o.symbols = append(o.symbols, trace.Symbol{Offset: off})
		o.frames = append(o.frames, frames)
	}
}

// write symbolizes and writes strings, symbols, each object's status and
// its types.
func (t *symbolTable) write(w *trace.Writer, report func(error)) {
	t.resolve()
	for _, id := range t.order {
		o := t.objects[id]
		s, msg := statusOrMissing(o.obj, o.openErr)
		status := statusOf(s)
		report(w.ObjectStatus(trace.ObjectStatus{Object: id, Status: status, Message: msg}))
		for i, sym := range o.symbols {
			sym.Object = id
			for _, f := range o.frames[i] {
				sym.Frames = append(sym.Frames, trace.Frame{
					Function: t.intern(w, report, f.Function),
					File:     t.intern(w, report, f.File),
					Line:     uint64(f.Line),
				})
			}
			report(w.Symbol(sym))
		}
		for _, ty := range o.types {
			report(w.Type(trace.Type{Object: id, Size: ty.Size, Name: ty.Name}))
		}
	}
}

func (t *symbolTable) intern(w *trace.Writer, report func(error), s string) uint64 {
	if s == "" {
		return 0
	}
	if id, ok := t.strings[s]; ok {
		return id
	}
	id := uint64(len(t.strings) + 1)
	t.strings[s] = id
	report(w.String(trace.String{ID: id, Value: s}))
	return id
}

func statusOf(s symbolize.Status) trace.SymbolStatus {
	switch s {
	case symbolize.Full:
		return trace.SymbolsFull
	case symbolize.NoDebug:
		return trace.SymbolsNoDebug
	case symbolize.Mismatch:
		return trace.SymbolsMismatch
	case symbolize.Stripped:
		return trace.SymbolsStripped
	}
	return trace.SymbolsMissing
}

func (t *symbolTable) close() {
	t.endPreload()
	for _, o := range t.objects {
		if o.queued {
			<-o.opened
		}
		if o.obj != nil {
			o.obj.Close()
		}
		if o.held != nil {
			o.held.Close()
		}
	}
}
