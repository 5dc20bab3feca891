package record

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// hello is a process that connected: a new program image or a fork child.
type hello struct {
	pid, ppid int
	fork      bool
	forkToken uint64 // a fork child: the parent's FORK sequence number + 1
	args      []string
	exe, cwd  string
	region    *region
	tsc       uint64 // when it connected
}

// server accepts agents on an abstract Unix socket, gives each process its
// region and passes it on to the recorder's loop.
type server struct {
	ln     *net.UnixListener
	name   string
	cfg    regionConfig
	clock  *coarseClock // nil: the agents read the time-stamp counter
	hellos chan *hello
	// inFlight counts the connections accepted whose hello is not in
	// hellos yet: an agent runs on once it has its welcome, which comes
	// before its hello goes in the channel.
	inFlight atomic.Int32
	errs     chan error
}

func listen(cfg regionConfig, clock *coarseClock) (*server, error) {
	var b [8]byte
	rand.Read(b[:])
	name := fmt.Sprintf("@memtrail-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: name, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("listening for the agent: %w", err)
	}
	s := &server{ln: ln, name: name, cfg: cfg, clock: clock, hellos: make(chan *hello, 64), errs: make(chan error, 16)}
	go s.serve()
	return s, nil
}

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
		s.inFlight.Add(1)
		h, err := s.handshake(conn)
		conn.Close()
		if err != nil {
			s.inFlight.Add(-1)
			s.report(err)
			continue
		}
		s.hellos <- h
		s.inFlight.Add(-1)
	}
}

func (s *server) report(err error) {
	select {
	case s.errs <- err:
	default:
	}
}

func (s *server) handshake(conn *net.UnixConn) (*hello, error) {
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, maxHello)
	n, _, _, _, err := conn.ReadMsgUnix(buf, nil)
	if err != nil {
		return nil, fmt.Errorf("reading an agent's hello: %w", err)
	}
	h, err := parseHello(buf[:n])
	if err != nil {
		return nil, err
	}
	h.tsc = rdtsc()
	r, err := newRegion(s.cfg, os.Getpid())
	welcome := make([]byte, welcomeBytes)
	binary.LittleEndian.PutUint32(welcome[0:], helloMagic)
	if err != nil {
		binary.LittleEndian.PutUint32(welcome[4:], 1)
		conn.WriteMsgUnix(welcome, nil, nil)
		return nil, fmt.Errorf("process %d is not recorded: %w", h.pid, err)
	}
	if s.clock != nil {
		s.clock.add(r)
	}
	binary.LittleEndian.PutUint64(welcome[8:], uint64(len(r.mem)))
	if _, _, err := conn.WriteMsgUnix(welcome, unix.UnixRights(r.fd), nil); err != nil {
		r.unmap()
		return nil, fmt.Errorf("answering process %d: %w", h.pid, err)
	}
	r.closeFD()
	h.region = r
	return h, nil
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
		forkToken: le.Uint64(b[helloForkToken:])}
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
	for _, a := range bytes.Split(bytes.TrimSuffix(cmdline, []byte{0}), []byte{0}) {
		h.args = append(h.args, string(a))
	}
	return h, nil
}
