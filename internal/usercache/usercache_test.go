package usercache_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/usercache"
)

// TestFallback: with neither XDG_CACHE_HOME nor HOME, the cache is the
// user's own directory in the temporary directory, created 0700.
func TestFallback(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("TMPDIR", tmp)
	dir, err := usercache.Dir("dwarf")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(tmp, "memtrail-"+strconv.Itoa(os.Geteuid()))
	if dir != filepath.Join(root, "dwarf") {
		t.Errorf("Dir: %s, want %s/dwarf", dir, root)
	}
	for _, d := range []string{root, dir} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want a directory 0700", d, fi.Mode(), err)
		}
	}
}

// TestPlanted: what another user made, or could change, is refused with
// an error that says what is wrong; a cache directory of one's own that
// others can only read is made private.
func TestPlanted(t *testing.T) {
	uid, gid := fixture.OtherUser(t)
	tmp := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", tmp)
	root := filepath.Join(tmp, "memtrail")
	mkdir := func(path string, mode os.FileMode) {
		t.Helper()
		if err := os.Mkdir(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	expectErr := func(want string) {
		t.Helper()
		_, err := usercache.Dir()
		if err == nil || !errors.Is(err, usercache.ErrUntrusted) || !strings.Contains(err.Error(), root) || !strings.Contains(err.Error(), want) {
			t.Errorf("Dir: %v; want an error about %s saying %q", err, root, want)
		}
	}

	mkdir(root, 0o755)
	os.Chown(root, uid, gid)
	expectErr("owned by uid " + strconv.Itoa(uid))
	os.Remove(root)

	mkdir(filepath.Join(tmp, "elsewhere"), 0o700)
	os.Symlink(filepath.Join(tmp, "elsewhere"), root)
	expectErr("symbolic link")
	os.Remove(root)

	mkdir(root, 0o775)
	expectErr("written by others")
	os.Chmod(root, 0o755)
	if _, err := usercache.Dir(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(root); fi.Mode().Perm() != 0o700 {
		t.Errorf("a cache directory others could read is still %v", fi.Mode())
	}

	file := filepath.Join(root, "f")
	os.WriteFile(file, []byte("x"), 0o600)
	if data, err := usercache.ReadFile(file, 10); err != nil || string(data) != "x" {
		t.Errorf("ReadFile of one's own file: %q, %v", data, err)
	}
	if _, err := usercache.ReadFile(file, 0); err == nil {
		t.Error("ReadFile read more than its limit")
	}
	os.Chmod(file, 0o666)
	if _, err := usercache.ReadFile(file, 10); !errors.Is(err, usercache.ErrUntrusted) {
		t.Errorf("ReadFile of a file others can write: %v", err)
	}
	os.Chmod(file, 0o644)
	os.Chown(file, uid, gid)
	if _, err := usercache.ReadFile(file, 10); !errors.Is(err, usercache.ErrUntrusted) {
		t.Errorf("ReadFile of another user's file: %v", err)
	}
	if err := usercache.CheckFile(file); !errors.Is(err, usercache.ErrUntrusted) {
		t.Errorf("CheckFile of another user's file: %v", err)
	}
	if _, err := usercache.ReadFile(file, 10, uid); err != nil {
		t.Errorf("ReadFile of a file of an owner allowed: %v", err)
	}
	link := filepath.Join(root, "link")
	mine := filepath.Join(root, "mine")
	os.WriteFile(mine, []byte("x"), 0o600)
	os.Symlink(mine, link)
	if _, err := usercache.ReadFile(link, 10); !errors.Is(err, usercache.ErrUntrusted) {
		t.Errorf("ReadFile through a symbolic link: %v", err)
	}
	if err := usercache.CheckFile(link); !errors.Is(err, usercache.ErrUntrusted) {
		t.Errorf("CheckFile of a symbolic link: %v", err)
	}
}
