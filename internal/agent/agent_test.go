package agent

import (
	"debug/elf"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestBuild builds the agent with its pinned flags (warnings are errors)
// and checks what it is: a library that exports every allocator entry
// point and needs nothing beyond libc — no C++ runtime, no libunwind, and
// no thread-local storage, which would change the programs it records.
func TestBuild(t *testing.T) {
	path, err := Path(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	for _, lib := range libs {
		if !strings.HasPrefix(lib, "libc.so") && !strings.HasPrefix(lib, "ld-linux") {
			t.Errorf("the agent needs %s; it may need only libc", lib)
		}
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_TLS {
			t.Error("the agent has thread-local storage")
		}
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	var exported []string
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && elf.ST_BIND(s.Info) == elf.STB_GLOBAL {
			exported = append(exported, s.Name)
		}
	}
	want := []string{"malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
		"memalign", "valloc", "pvalloc", "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
		"_ZnwmSt11align_val_t", "_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t",
		"_ZnamSt11align_val_tRKSt9nothrow_t", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZdlPvSt11align_val_t",
		"_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t", "_ZdlPvRKSt9nothrow_t",
		"_ZdaPvRKSt9nothrow_t", "_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_tRKSt9nothrow_t",
		"dlclose", "_exit", "_Exit", "execve", "execvpe", "fexecve", "posix_spawn", "posix_spawnp",
		"execv", "execvp", "execl", "execlp", "execle", "system", "popen"}
	for _, name := range want {
		if !slices.Contains(exported, name) {
			t.Errorf("the agent does not export %s", name)
		}
	}
	for _, name := range exported {
		if !slices.Contains(want, name) && !strings.HasPrefix(name, "_") {
			t.Errorf("the agent exports %s, which it should keep to itself", name)
		}
	}
}

// TestCacheKey checks that the cached agent is keyed by its sources: the
// same inputs give the same path, so a build is reused.
func TestCacheKey(t *testing.T) {
	dir := t.TempDir()
	a, err := Path(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Path(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("two builds of the same sources: %s and %s", a, b)
	}
}

// TestNoCompiler checks the message a machine without a C compiler gets.
func TestNoCompiler(t *testing.T) {
	t.Setenv("CC", "/nonexistent/cc")
	_, err := Path(t.TempDir())
	if !errors.Is(err, ErrNoCompiler) || !strings.Contains(err.Error(), "install gcc") {
		t.Errorf("error %v, want one saying to install gcc", err)
	}
}
