package record

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// hello is a process that connected: a new program image or a fork child.
type hello struct {
	pid, ppid int
	fork      bool
	forkToken uint64 // a fork child: the parent's FORK sequence number + 1
	key       []byte // the run's key, as the process knows it
	args      []string
	exe, cwd  string
	// ownAlloc are the allocation functions that the program (or a
	// library loaded before the agent) defines itself, by the object
	// that defines them: calls to them do not reach the agent.
	ownAlloc []ownAllocator
	// patched says that the agent patched the executable's own
	// allocation functions to pass through its hooks.
	patched bool
	region  *region
	tsc     uint64 // when it connected
	// pidfd is the process's, opened while it waited for its welcome
	// (alive, or a zombie if killed meanwhile), so that the recorder
	// learns how it ended even if its parent reaps it before the
	// recorder takes the hello in; -1 if it could not be opened.
	pidfd int
	// Without a pidfd: gone says the process had already ended (and been
	// reaped); else pidfd_open is not to be had (a kernel before 5.3, a
	// seccomp filter, valgrind), and the process is watched through /proc
	// instead, as the process that started at started (see procEnded).
	gone    bool
	started uint64
}

// server accepts agents on an abstract Unix socket, gives each process its
// region and passes it on to the recorder's loop.
//
// Any local user can connect to an abstract socket, and a hello decides
// what goes into the trace, so a connection is only heard if its peer
// (SO_PEERCRED) runs as the recorder's user and is a descendant of the
// recorder (the program, or what it started: the recorder is their
// subreaper), its hello names the peer's own pid, and carries the run's
// key, which the agents find in their environment.
type server struct {
	ln     *net.UnixListener
	name   string
	key    string // keyLen hex digits, new for each run
	cfg    regionConfig
	clock  *coarseClock // nil: the agents read the time-stamp counter
	hellos chan *hello
	// inFlight counts the connections accepted whose hello is not in
	// hellos yet: an agent runs on once it has its welcome, which comes
	// before its hello goes in the channel.
	inFlight atomic.Int32
	// handshakes bounds the handshakes under way, each in a goroutine
	// of its own so that a process that connects and says nothing holds
	// up no other.
	handshakes chan struct{}
	// welcoming serializes the welcomes and the hellos that follow them
	// into the channel: a process may fork or exec as soon as it has its
	// welcome, and the hello of the child must come after its parent's.
	welcoming sync.Mutex
	errs      chan error
}

// maxHandshakes is how many handshakes may be under way at once.
const maxHandshakes = 64

// helloTimeout is how long a process that connected has to say hello: an
// agent sends it at once.
const helloTimeout = 2 * time.Second

func listen(cfg regionConfig, clock *coarseClock) (*server, error) {
	var b [8]byte
	rand.Read(b[:])
	name := fmt.Sprintf("@memtrail-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
	var key [keyLen / 2]byte
	rand.Read(key[:])
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: name, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("listening for the agent: %w", err)
	}
	s := &server{ln: ln, name: name, key: hex.EncodeToString(key[:]), cfg: cfg, clock: clock, hellos: make(chan *hello, 64),
		handshakes: make(chan struct{}, maxHandshakes), errs: make(chan error, 16)}
	go s.serve()
	return s, nil
}

// env is the value of MEMTRAIL_SOCK for the agents: the key, then where
// the recorder listens.
func (s *server) env() string { return s.key + ":" + s.name }

func (s *server) close() { s.ln.Close() }

func (s *server) serve() {
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.report(fmt.Errorf("accepting an agent: %w", err))
			time.Sleep(10 * time.Millisecond)
			continue
		}
		pid, err := s.admit(conn)
		if err != nil {
			conn.Close()
			s.report(err)
			continue
		}
		s.inFlight.Add(1)
		s.handshakes <- struct{}{}
		go func() {
			defer func() { <-s.handshakes }()
			err := s.handshake(conn, pid)
			conn.Close()
			if err != nil {
				s.report(err)
			}
			s.inFlight.Add(-1) // after the hello is in the channel
		}()
	}
}

func (s *server) report(err error) {
	select {
	case s.errs <- err:
	default:
	}
}

// admit checks who connected, before reading anything from it, and
// returns its pid.
func (s *server) admit(conn *net.UnixConn) (int, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("accepting an agent: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return 0, fmt.Errorf("accepting an agent: who connected is not known: %w", errors.Join(err, credErr))
	}
	pid := int(cred.Pid)
	if int(cred.Uid) != os.Geteuid() {
		return 0, fmt.Errorf("refused a connection from %s of uid %d: the recorder runs as uid %d", processName(pid), cred.Uid, os.Geteuid())
	}
	if !descendant(pid, os.Getpid()) {
		return 0, fmt.Errorf("refused a connection from %s: not one the recorded program started", processName(pid))
	}
	return pid, nil
}

// maxDepth bounds the walk up the process tree.
const maxDepth = 4096

// descendant says whether process pid is a descendant of process root,
// from the parents /proc gives.
func descendant(pid, root int) bool {
	for range maxDepth {
		if pid <= 1 {
			return false
		}
		ppid, ok := parentOf(pid)
		if !ok {
			return false
		}
		if ppid == root {
			return true
		}
		pid = ppid
	}
	return false
}

// parentClaim says whether process pid may have had parent claimed when
// it said hello: the parent /proc gives, or one that has ended since,
// whose children the recorder adopted.
func parentClaim(pid, claimed int) bool {
	parent, ok := parentOf(pid)
	switch {
	case !ok:
		return false
	case parent == claimed:
		return true
	case parent != os.Getpid():
		return false
	}
	fields, ok := statFields(claimed)
	return !ok || len(fields) == 0 || zombie(fields)
}

// parentOf returns the parent of process pid (field 4 of its stat).
func parentOf(pid int) (int, bool) {
	fields, ok := statFields(pid)
	if !ok || len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}

// handshake reads the hello of process pid, checks it, welcomes the
// process with its region and passes the hello on.
func (s *server) handshake(conn *net.UnixConn, pid int) error {
	conn.SetDeadline(time.Now().Add(helloTimeout))
	buf := make([]byte, maxHello)
	n, _, _, _, err := conn.ReadMsgUnix(buf, nil)
	if err != nil {
		return fmt.Errorf("reading the hello of %s: %w", processName(pid), err)
	}
	h, err := parseHello(buf[:n])
	if err != nil {
		return fmt.Errorf("%s: %w", processName(pid), err)
	}
	if subtle.ConstantTimeCompare(h.key, []byte(s.key)) != 1 {
		return fmt.Errorf("refused %s: its hello has not the key of this run", processName(pid))
	}
	if h.pid != pid {
		return fmt.Errorf("refused %s: its hello says it is process %d", processName(pid), h.pid)
	}
	if !parentClaim(pid, h.ppid) {
		// A fork child of another process would take the place of
		// that process's real child, which would then be held back
		// (and, its ring full, held up) until that process ended.
		return fmt.Errorf("refused %s: its hello says its parent is process %d, which it is not", processName(pid), h.ppid)
	}
	s.welcoming.Lock()
	defer s.welcoming.Unlock()
	h.tsc = rdtsc()
	r, err := newRegion(s.cfg, os.Getpid())
	welcome := make([]byte, welcomeBytes)
	binary.LittleEndian.PutUint32(welcome[0:], helloMagic)
	if err != nil {
		binary.LittleEndian.PutUint32(welcome[4:], 1)
		conn.WriteMsgUnix(welcome, nil, nil)
		return fmt.Errorf("%s is not recorded: %w", processName(h.pid), err)
	}
	if s.clock != nil {
		s.clock.add(r)
	}
	binary.LittleEndian.PutUint64(welcome[8:], uint64(len(r.mem)))
	h.pidfd, err = unix.PidfdOpen(pid, 0)
	if err != nil {
		h.pidfd = -1
		var alive bool
		h.started, alive = startTime(pid)
		h.gone = !alive || errors.Is(err, unix.ESRCH)
	}
	if _, _, err := conn.WriteMsgUnix(welcome, unix.UnixRights(r.fd), nil); err != nil {
		r.unmap()
		if h.pidfd >= 0 {
			unix.Close(h.pidfd)
		}
		return fmt.Errorf("answering %s: %w", processName(h.pid), err)
	}
	r.closeFD()
	h.region = r
	s.hellos <- h
	return nil
}

func parseHello(b []byte) (*hello, error) {
	if len(b) < helloFixed || binary.LittleEndian.Uint32(b) != helloMagic {
		return nil, errors.New("an agent sent a malformed hello")
	}
	le := binary.LittleEndian
	if v := le.Uint32(b[4:]); v != protocolVersion {
		return nil, fmt.Errorf("an agent speaks protocol %d, this recorder %d", v, protocolVersion)
	}
	h := &hello{pid: int(le.Uint32(b[8:])), ppid: int(le.Uint32(b[12:])), fork: le.Uint32(b[16:])&helloFork != 0,
		forkToken: le.Uint64(b[helloForkToken:]), key: b[helloKey : helloKey+keyLen], pidfd: -1}
	rest := b[helloFixed:]
	take := func(n uint32) []byte {
		if int(n) > len(rest) {
			n = uint32(len(rest))
		}
		v := rest[:n]
		rest = rest[n:]
		return v
	}
	cmdline := take(le.Uint32(b[20:]))
	h.exe = string(take(le.Uint32(b[24:])))
	h.cwd = string(take(le.Uint32(b[28:])))
	h.ownAlloc, h.patched = parseOwnAlloc(take(le.Uint32(b[helloOwnAlloc:])), h.exe)
	for _, a := range bytes.Split(bytes.TrimSuffix(cmdline, []byte{0}), []byte{0}) {
		h.args = append(h.args, string(a))
	}
	return h, nil
}

// processName names process pid in messages, by pid and program, as
// process.String does for the processes that said hello; the program
// is "?" once the process has gone.
func processName(pid int) string {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		exe = "?"
	}
	return fmt.Sprintf("process %d (%s)", pid, shown(exe))
}
