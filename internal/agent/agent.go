// Package agent holds memtrail's C agent — the shared library preloaded
// into the recorded program — and builds it.
//
// The C sources are embedded in the memtrail binary and compiled on first
// use with the system's C compiler into a cache directory, keyed by a hash
// of the sources, the flags and the compiler's identity, so a rebuilt
// memtrail or a new compiler never runs a stale agent.
package agent

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/memtrail/memtrail/internal/usercache"
)

//go:embed csrc/*.c csrc/*.h
var sources embed.FS

// Flags are the pinned compiler flags. Frame pointers in the agent's own
// functions let a hook hand the unwinder its caller's frame; no sibling
// calls keep that frame alive while the hook runs.
var Flags = []string{
	"-shared", "-fPIC", "-O2", "-g", "-std=gnu11",
	"-Wall", "-Wextra", "-Werror",
	"-fvisibility=hidden", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls",
	"-fasynchronous-unwind-tables", "-ftls-model=initial-exec",
}

// Libs are linked after the sources.
var Libs = []string{"-ldl", "-lpthread"}

// ErrNoCompiler says that no C compiler could be found.
var ErrNoCompiler = errors.New("no C compiler found: memtrail builds its agent with cc; install gcc (e.g. apt-get install gcc) or set CC")

// Compiler returns the C compiler to use: $CC, else cc, else gcc.
func Compiler() (string, error) {
	if cc := os.Getenv("CC"); cc != "" {
		fields := strings.Fields(cc)
		if p, err := exec.LookPath(fields[0]); err == nil {
			return p, nil
		}
		return "", fmt.Errorf("%w (CC=%q not found)", ErrNoCompiler, cc)
	}
	for _, name := range []string{"cc", "gcc", "clang"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoCompiler
}

// Path returns the path of the built agent, building it into cacheDir if
// needed. An empty cacheDir means memtrail's cache directory (see
// usercache). The directory and an agent found in it are checked first:
// the agent is loaded into every program memtrail runs, so one that
// another user could have put there or changed is an error.
func Path(cacheDir string) (string, error) {
	cc, err := Compiler()
	if err != nil {
		return "", err
	}
	if cacheDir == "" {
		cacheDir, err = usercache.Dir()
	} else {
		err = usercache.Make(cacheDir)
	}
	if err != nil {
		return "", fmt.Errorf("agent cache: %w", err)
	}
	key, err := cacheKey(cc)
	if err != nil {
		return "", err
	}
	out := filepath.Join(cacheDir, "agent-"+key+".so")
	if err := usercache.CheckFile(out); err == nil {
		return out, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("agent: %w", err)
	}
	if err := build(cc, cacheDir, out); err != nil {
		return "", err
	}
	return out, nil
}

func sourceNames() ([]string, error) {
	entries, err := fs.ReadDir(sources, "csrc")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

func cacheKey(cc string) (string, error) {
	h := sha256.New()
	names, err := sourceNames()
	if err != nil {
		return "", err
	}
	for _, n := range names {
		b, err := sources.ReadFile("csrc/" + n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", n, len(b))
		h.Write(b)
	}
	fmt.Fprintln(h, strings.Join(Flags, " "), strings.Join(Libs, " "))
	version, err := exec.Command(cc, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("running %s --version: %w", cc, err)
	}
	h.Write(version)
	fmt.Fprintln(h, cc)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// build compiles the sources in a fresh directory and moves the result
// into place atomically, so concurrent builds cannot see a partial file.
func build(cc, cacheDir, out string) error {
	dir, err := os.MkdirTemp(cacheDir, "build-")
	if err != nil {
		return fmt.Errorf("creating agent build directory: %w", err)
	}
	defer os.RemoveAll(dir)
	names, err := sourceNames()
	if err != nil {
		return err
	}
	var cfiles []string
	for _, n := range names {
		b, err := sources.ReadFile("csrc/" + n)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			return fmt.Errorf("writing agent source: %w", err)
		}
		if strings.HasSuffix(n, ".c") {
			cfiles = append(cfiles, n)
		}
	}
	args := append(append(append([]string{}, Flags...), "-o", "agent.so"), cfiles...)
	args = append(args, Libs...)
	cmd := exec.Command(cc, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the agent with %s: %w\n%s", cc, err, stderr.String())
	}
	// Whatever the umask, no one else may change it.
	if err := os.Chmod(filepath.Join(dir, "agent.so"), 0o755); err != nil {
		return fmt.Errorf("installing the agent: %w", err)
	}
	if err := os.Rename(filepath.Join(dir, "agent.so"), out); err != nil {
		return fmt.Errorf("installing the agent: %w", err)
	}
	return nil
}
