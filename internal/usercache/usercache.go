// Package usercache gives memtrail's per-user cache directory, and checks
// what memtrail finds there before it trusts it: the agent it preloads
// into programs, the debug sections it reads back, the analyses it
// reuses.
//
// The directory is $XDG_CACHE_HOME/memtrail or ~/.cache/memtrail, else
// (neither set, as under some service managers) memtrail-<uid> in the
// temporary directory. A place other users can write to is no cache:
// another user could put there a library that memtrail would load into
// the programs it runs. So each directory is created 0700 and, on every
// use, must be a directory (not a symbolic link) owned by the user
// memtrail runs as and writable by no one else; every file taken from it
// must be a regular file owned by that user and writable by no one else.
package usercache

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// ErrUntrusted says that a file or directory is not one memtrail may
// trust: someone else owns it or can change it.
var ErrUntrusted = errors.New("not trusted")

// Root returns memtrail's cache directory for the current user, without
// creating or checking it.
func Root() string {
	if base, err := os.UserCacheDir(); err == nil {
		return filepath.Join(base, "memtrail")
	}
	return filepath.Join(os.TempDir(), "memtrail-"+strconv.Itoa(os.Geteuid()))
}

// Dir returns the directory of memtrail's cache named by names (none: the
// cache itself), creating what is missing of it 0700, and checking each
// directory from the cache down.
func Dir(names ...string) (string, error) {
	dir := Root()
	// The cache's parent (~/.cache) is the user's; the temporary
	// directory exists already.
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", fmt.Errorf("creating the cache directory: %w", err)
	}
	if err := Make(dir); err != nil {
		return "", err
	}
	for _, name := range names {
		dir = filepath.Join(dir, name)
		if err := Make(dir); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// Make creates the directory dir 0700 if it does not exist (and its
// missing parents), and checks it with CheckDir: for a cache directory
// given explicitly, as the tests' is.
func Make(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the cache directory: %w", err)
	}
	return CheckDir(dir)
}

// CheckDir checks that dir is a directory of the current user's that no
// one else can write to. One that others can read (made by an older
// memtrail) is made private.
func CheckDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("cache directory: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("cache directory %s is a symbolic link: %w (remove it, or set XDG_CACHE_HOME)", dir, ErrUntrusted)
	}
	if !fi.IsDir() {
		return fmt.Errorf("cache directory %s is not a directory: %w (remove it, or set XDG_CACHE_HOME)", dir, ErrUntrusted)
	}
	if err := checkOwner(dir, fi); err != nil {
		return fmt.Errorf("cache directory %w (remove it, or set XDG_CACHE_HOME)", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("cache directory: %w", err)
		}
	}
	return nil
}

// checkOwner checks that the file or directory at path, whose Lstat is
// fi, is owned by the current user or one of owners, and that no one else
// can write to it.
func checkOwner(path string, fi fs.FileInfo, owners ...int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner known: %w", path, ErrUntrusted)
	}
	owned := int(st.Uid) == os.Geteuid()
	for _, uid := range owners {
		owned = owned || int(st.Uid) == uid
	}
	if !owned {
		return fmt.Errorf("%s is owned by uid %d, not by uid %d: %w", path, st.Uid, os.Geteuid(), ErrUntrusted)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s can be written by others (mode %04o): %w", path, fi.Mode().Perm(), ErrUntrusted)
	}
	return nil
}

// CheckFile checks that the file at path is a regular file (not a
// symbolic link) owned by the current user or one of owners, that no one
// else can write to. An error wraps fs.ErrNotExist when there is no file,
// and ErrUntrusted when there is one that must not be used.
func CheckFile(path string, owners ...int) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	return checkFile(path, fi, owners)
}

func checkFile(path string, fi fs.FileInfo, owners []int) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file: %w", path, ErrUntrusted)
	}
	return checkOwner(path, fi, owners...)
}

// ReadFile reads the file at path, checked as CheckFile does; the check
// is made on the file opened, so it cannot be swapped in between. It
// reads at most limit bytes: a longer file is an error.
func ReadFile(path string, limit int64, owners ...int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link: %w", path, ErrUntrusted)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkFile(path, fi, owners); err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d expected", path, fi.Size(), limit)
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return data, nil
}
