package web

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/memtrail/memtrail/internal/analysis"
)

// Which source files /api/source reads. A trace names its source files,
// and whoever built the program chose those names (#line "/etc/shadow"
// names any file), and whoever owns a source directory may swap a file
// for a link to any other; and the viewer may run as root. So a file
// named by the trace is read only if:
//
//  1. its name is absolute, or relative and found under the -source-dir
//     the user gave (never under the viewer's working directory);
//  2. every link on its way stays inside an allowed root: the trace's
//     build directories (the working directory of its processes) and
//     the -source-dir; a path with no link may lie anywhere;
//  3. it is a regular file, opened without following a link, and still
//     the file the path led to once opened (no directory of its path was
//     swapped for a link meanwhile);
//  4. it lies in an allowed root, or it is readable by every user, or
//     the viewing user owns it and is not root (root owns the machine's
//     secrets, readable by root only).
//
// Of a file bigger than maxSource, the first maxSource bytes are served,
// and the answer says so.
type sourceAccess struct {
	roots     []string // the allowed roots, links resolved
	sourceDir string   // with links resolved; "" if none given
	uid       int      // the viewing user
}

// errRefused marks a source file the server will not read.
var errRefused = errors.New("refused")

// maxSource bounds the part of a source file served.
const maxSource = 8 << 20

// buildDirs returns the working directories of the processes of m.
func buildDirs(m *analysis.Model) []string {
	var dirs []string
	for _, p := range m.Processes {
		if p.Cwd != "" {
			dirs = append(dirs, p.Cwd)
		}
	}
	return dirs
}

// newSourceAccess returns the rules for sources under the roots dirs (the
// build directories) and sourceDir (if not "").
func newSourceAccess(dirs []string, sourceDir string) (*sourceAccess, error) {
	a := &sourceAccess{uid: os.Geteuid()}
	if sourceDir != "" {
		abs, err := filepath.Abs(sourceDir)
		if err != nil {
			return nil, fmt.Errorf("-source-dir %s: %w", sourceDir, err)
		}
		resolved, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, fmt.Errorf("-source-dir: %w", err)
		}
		if st, err := os.Stat(resolved); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("-source-dir %s is not a directory", sourceDir)
		}
		a.sourceDir = resolved
		a.roots = append(a.roots, resolved)
	}
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			continue
		}
		if resolved, err := filepath.EvalSymlinks(d); err == nil && resolved != "/" {
			a.roots = append(a.roots, resolved)
		}
	}
	return a, nil
}

// within reports whether path lies in the directory dir (both clean).
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// inRoot reports whether path (links resolved) lies in an allowed root.
func (a *sourceAccess) inRoot(path string) bool {
	for _, r := range a.roots {
		if within(path, r) {
			return true
		}
	}
	return false
}

// read returns the first maxSource bytes of the source file the trace
// names name, and whether there is more; errors wrapping errRefused are
// files the rules above refuse.
func (a *sourceAccess) read(name string) ([]byte, bool, error) {
	path := filepath.Clean(name)
	if !filepath.IsAbs(name) {
		if a.sourceDir == "" {
			return nil, false, fmt.Errorf("%w: %q is a relative name: start memtrail view with -source-dir DIR to read it under DIR", errRefused, name)
		}
		path = filepath.Join(a.sourceDir, name)
		if !within(path, a.sourceDir) {
			return nil, false, fmt.Errorf("%w: %q leads out of -source-dir", errRefused, name)
		}
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, false, fmt.Errorf("cannot read the source file: %w", err)
	}
	if resolved != path && !a.inRoot(resolved) {
		return nil, false, fmt.Errorf("%w: %s is a link to %s, outside the program's build directories", errRefused, name, resolved)
	}
	fd, err := syscall.Open(resolved, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, false, fmt.Errorf("%w: %s became a link", errRefused, name)
		}
		return nil, false, fmt.Errorf("cannot read the source file %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), resolved)
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, false, fmt.Errorf("cannot read the source file %s: %w", name, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, false, fmt.Errorf("%w: %s is not a regular file", errRefused, name)
	}
	// The directories of the path may have changed since it was
	// resolved: the file opened must be where the rules were checked.
	if opened, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err != nil || opened != resolved {
		return nil, false, fmt.Errorf("%w: %s moved while it was opened", errRefused, name)
	}
	if !a.inRoot(resolved) && st.Mode&0o004 == 0 && (a.uid == 0 || int(st.Uid) != a.uid) {
		return nil, false, fmt.Errorf("%w: %s is neither in the program's build directories nor readable by every user, nor yours", errRefused, name)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSource+1))
	if err != nil {
		return nil, false, fmt.Errorf("cannot read the source file %s: %w", name, err)
	}
	if len(b) > maxSource {
		return b[:maxSource], true, nil
	}
	return b, false, nil
}

// sourceLines splits a file into its lines; of a file cut short, the last
// line, maybe cut in two, is left out.
func sourceLines(b []byte, cut bool) []string {
	if cut {
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i+1]
		}
	}
	lines := []string{}
	if len(b) == 0 {
		return lines
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	for _, l := range bytes.Split(b, []byte("\n")) {
		lines = append(lines, string(bytes.TrimSuffix(l, []byte("\r"))))
	}
	return lines
}

// sourceStatus is the HTTP status of an error of read.
func sourceStatus(err error) int {
	switch {
	case errors.Is(err, errRefused):
		return http.StatusForbidden
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}
