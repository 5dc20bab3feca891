package record

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CheckProgram finds the program to run and makes sure the agent can be
// preloaded into it: it must exist, be executable, and — if it is an ELF
// file — be a dynamically linked x86-64 program. Scripts are fine: their
// interpreter is what gets recorded, unless it is statically linked.
// (Whatever else is wrong with an interpreter, the exec says, or, for a
// setuid one, ErrNotLoaded.)
func CheckProgram(name string) (string, error) {
	path, err := checkProgram(name)
	if err != nil {
		return "", err
	}
	// The kernel follows the #! of an interpreter that is a script
	// itself, four levels deep (BINPRM_MAX_RECURSION).
	interp := path
	for range 5 {
		next, ok := interpreter(interp)
		if !ok {
			break
		}
		if isStatic(next) {
			return "", fmt.Errorf("%s: its interpreter %s is %w", name, next, errStatic)
		}
		interp = next
	}
	return path, nil
}

// errStatic says why a statically linked program cannot be recorded.
var errStatic = errors.New("statically linked; memtrail needs the dynamic loader to preload its agent (link it dynamically, or wrap malloc with -Wl,--wrap)")

// interpreter returns the program the #! line of the script at path
// names (a relative name is opened from the current directory, as the
// kernel does).
func interpreter(path string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	var head [256]byte
	n, _ := io.ReadFull(f, head[:])
	line, ok := strings.CutPrefix(string(head[:n]), "#!")
	if !ok {
		return "", false
	}
	line, _, _ = strings.Cut(line, "\n")
	fields := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' })
	if len(fields) == 0 {
		return "", false
	}
	return fields[0], true
}

// isStatic says whether path is an ELF program without an interpreter
// (PT_INTERP): one the dynamic loader never sees.
func isStatic(path string) bool {
	ef, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return ef.Type == elf.ET_EXEC || ef.Type == elf.ET_DYN
}

// checkProgram is CheckProgram for one file, script or not.
func checkProgram(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s: program not found", name)
		}
		if errors.Is(err, os.ErrPermission) {
			return "", fmt.Errorf("%s: not executable", name)
		}
		return "", fmt.Errorf("%s: %w", name, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	defer f.Close()
	if why := secureExec(f); why != "" {
		return "", fmt.Errorf("%s %s: the loader ignores LD_PRELOAD for it, so nothing can be recorded", name, why)
	}
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || string(magic[:]) != elf.ELFMAG {
		return path, nil
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", fmt.Errorf("%s: not a valid ELF program: %w", name, err)
	}
	if ef.Class != elf.ELFCLASS64 || ef.Machine != elf.EM_X86_64 {
		return "", fmt.Errorf("%s: a %s %s program; memtrail records x86-64 programs only", name, ef.Class, ef.Machine)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			return path, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, errStatic)
}

// secureExec says why running f would put the loader in secure mode
// (AT_SECURE), in which it ignores LD_PRELOAD: f is setuid to another user,
// setgid to another group, or has file capabilities (which only root
// already holds), on a file system that honours them. "" if it would not.
// Running such a program as its owner is fine: nothing changes hands.
func secureExec(f *os.File) string {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return ""
	}
	var fs unix.Statfs_t
	if unix.Fstatfs(int(f.Fd()), &fs) == nil && fs.Flags&unix.ST_NOSUID != 0 {
		return ""
	}
	switch {
	case st.Mode&unix.S_ISUID != 0 && int(st.Uid) != os.Geteuid():
		return "is setuid"
	case st.Mode&(unix.S_ISGID|unix.S_IXGRP) == unix.S_ISGID|unix.S_IXGRP && int(st.Gid) != os.Getegid():
		return "is setgid"
	}
	if os.Geteuid() != 0 {
		if _, err := unix.Fgetxattr(int(f.Fd()), "security.capability", nil); err == nil {
			return "has file capabilities"
		}
	}
	return ""
}

// createOutput creates the trace file before the program starts, so an
// unwritable path fails before anything runs. With no path a temporary
// name in the current directory is used until the program's pid is known.
// A new trace is private (0600), whatever the umask, as core dumps are:
// it holds the command line, paths and the host name.
func createOutput(path string) (f *os.File, temporary bool, err error) {
	if path != "" {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, false, fmt.Errorf("creating the trace: %w", err)
		}
		return f, false, nil
	}
	f, err = os.CreateTemp(".", ".memtrail-*.mtr") // 0600
	if err != nil {
		return nil, false, fmt.Errorf("creating the trace in the current directory: %w", err)
	}
	return f, true, nil
}

// defaultName is <program>.<pid>.mtr, as heaptrack names its files.
func defaultName(program string, pid int) string {
	return filepath.Base(program) + "." + strconv.Itoa(pid) + ".mtr"
}

// agentEnv adds the agent to LD_PRELOAD and tells it where the recorder
// listens, and the run's key, in MEMTRAIL_SOCK (see server.env), and,
// with patchOwn, to patch a program's own allocator, in
// MEMTRAIL_PATCH_OWN_ALLOC (see Options.LeaveOwnAllocator).
func agentEnv(env []string, agentPath, socket string, patchOwn bool) []string {
	out := make([]string, 0, len(env)+2)
	preload := agentPath
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "LD_PRELOAD="):
			if old := strings.TrimPrefix(kv, "LD_PRELOAD="); old != "" {
				preload += ":" + old
			}
		case strings.HasPrefix(kv, "MEMTRAIL_SOCK="), strings.HasPrefix(kv, "MEMTRAIL_PATCH_OWN_ALLOC="):
		default:
			out = append(out, kv)
		}
	}
	if patchOwn {
		out = append(out, "MEMTRAIL_PATCH_OWN_ALLOC=1")
	}
	return append(out, "LD_PRELOAD="+preload, "MEMTRAIL_SOCK="+socket)
}

// programFiles returns the program's standard streams as os.StartProcess
// takes them, nil for a closed one: the program gets memtrail's own
// stdin, stdout and stderr as memtrail was given them, closed ones
// included, since a program may well behave differently with one closed
// (echo fails with "write error: Bad file descriptor").
func programFiles(stdin, stdout, stderr *os.File) []*os.File {
	files := []*os.File{stdin, stdout, stderr}
	var closed [3]bool
	for fd, f := range files {
		closed[fd] = f != nil && f.Fd() == uintptr(fd) && looksClosedAtStart(fd)
	}
	// The runtime opens /dev/null once for each closed fd; one /dev/null
	// on several of them (daemon(3) gives all three one) was given.
	var shared [3]bool
	for a := range 3 {
		for b := a + 1; b < 3; b++ {
			if closed[a] && closed[b] && sameOpenFile(a, b) {
				shared[a], shared[b] = true, true
			}
		}
	}
	for fd := range files {
		if closed[fd] && !shared[fd] {
			files[fd] = nil
		}
	}
	return files
}

// sameOpenFile says whether fds a and b of memtrail share one open file
// description (kcmp(2) KCMP_FILE); false where kcmp is not allowed.
func sameOpenFile(a, b int) bool {
	const kcmpFile = 0
	pid := uintptr(os.Getpid())
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, pid, pid, kcmpFile, uintptr(a), uintptr(b), 0)
	return errno == 0 && r == 0
}

// runtimeDevNull is how /proc/self/fdinfo shows the /dev/null the Go
// runtime opens (checkfds, before main) on each of fds 0–2 that was
// closed when memtrail started: open(2) with O_RDWR only, to which the
// x86-64 kernel adds its O_LARGEFILE, 0o100000 (unix.O_LARGEFILE is 0
// there, as user space need not pass it).
const runtimeDevNull = unix.O_RDWR | 0o100000

// looksClosedAtStart says whether standard fd was closed when memtrail
// started, which fcntl can no longer tell since the runtime has put
// /dev/null there. A stream the user gave as /dev/null opened for reading
// and writing (the shell's <>/dev/null) looks exactly the same, and is
// taken as closed: reading or writing /dev/null does nothing either way,
// though the program sees EBADF rather than end of file.
func looksClosedAtStart(fd int) bool {
	if link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err != nil || link != os.DevNull {
		return false
	}
	info, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(info), "\n") {
		if octal, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(octal), 8, 32)
			return err == nil && flags == runtimeDevNull
		}
	}
	return false
}
