package stackdepth

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// StackUsage is one line of a gcc -fstack-usage (.su) file:
//
//	file:line:column:function<TAB>bytes<TAB>qualifiers
//
// where bytes is the frame and the return address, and the qualifiers
// are "static" (the frame is fixed), "dynamic" (it also grows at run time,
// by alloca or a VLA) or "dynamic,bounded" (it grows, but bytes bounds
// it). For C++ the function is its declaration ("int ns::A::f(int)").
type StackUsage struct {
	File     string
	Line     int
	Function string
	Bytes    uint64
	Dynamic  bool
	Bounded  bool
}

// ParseStackUsage reads the lines of a .su file. name is for errors.
func ParseStackUsage(r io.Reader, name string) ([]StackUsage, error) {
	var out []StackUsage
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s:%d: not a -fstack-usage line (want location, size and qualifiers separated by tabs): %q", name, n, line)
		}
		// The function's name may hold colons (C++); the file, line and
		// column come first.
		loc := strings.SplitN(fields[0], ":", 4)
		if len(loc) != 4 {
			return nil, fmt.Errorf("%s:%d: location %q is not file:line:column:function", name, n, fields[0])
		}
		lineNo, err1 := strconv.Atoi(loc[1])
		bytes, err2 := strconv.ParseUint(fields[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s:%d: bad line or size in %q", name, n, line)
		}
		su := StackUsage{File: loc[0], Line: lineNo, Function: loc[3], Bytes: bytes}
		for _, q := range strings.Split(fields[2], ",") {
			switch strings.TrimSpace(q) {
			case "static":
			case "dynamic":
				su.Dynamic = true
			case "bounded":
				su.Bounded = true
			default:
				return nil, fmt.Errorf("%s:%d: unknown qualifier %q", name, n, q)
			}
		}
		out = append(out, su)
	}
	return out, sc.Err()
}

// readStackUsage applies the .su files of paths (files, or directories
// whose .su files are read) or, with none, those beside the program's
// sources (foo.su beside foo.c, where gcc -c foo.c writes it): each line
// that names a function of the binary gives its frame.
func (a *Analysis) readStackUsage(f *elf.File, paths []string) error {
	var files []string
	explicit := len(paths) > 0
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("-su: %w", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		found, err := filepath.Glob(filepath.Join(p, "*.su"))
		if err != nil {
			return err
		}
		if len(found) == 0 {
			return fmt.Errorf("-su: %s holds no .su file", p)
		}
		files = append(files, found...)
	}
	if !explicit {
		for _, src := range a.sourceFiles() {
			su := strings.TrimSuffix(src, filepath.Ext(src)) + ".su"
			if _, err := os.Stat(su); err == nil {
				files = append(files, su)
			}
		}
	}
	var lines []StackUsage
	for _, path := range files {
		fh, err := os.Open(path)
		if err != nil {
			return err
		}
		got, err := ParseStackUsage(fh, path)
		fh.Close()
		if err != nil {
			if explicit {
				return err
			}
			a.Notes = append(a.Notes, err.Error())
			continue
		}
		lines = append(lines, got...)
	}
	unmatched := 0
	for _, su := range lines {
		fn := a.matchStackUsage(su)
		if fn == nil {
			unmatched++
			continue
		}
		fn.StackUsage = int64(su.Bytes)
		fn.Frame = max(su.Bytes, returnAddress) - returnAddress
		fn.Source = FromStackUsage
		fn.Dynamic = su.Dynamic
		fn.Bounded = su.Bounded
		// The .su line is the function's declaration, where DWARF's line
		// table gives the first statement at its entry.
		fn.Line = su.Line
		if fn.File == "" {
			fn.File = su.File
		}
	}
	if unmatched > 0 {
		a.Notes = append(a.Notes, fmt.Sprintf("%d of %d -fstack-usage lines name no function of the binary (inlined or removed, or C++ templates, whose .su names are not matched)", unmatched, len(lines)))
	}
	return nil
}

// matchStackUsage returns the function a .su line is about: one of that
// name (C) or whose demangled name ends the line's declaration (C++);
// among several (static functions of different files), the one whose
// source file has the line's base name.
func (a *Analysis) matchStackUsage(su StackUsage) *Function {
	var found []*Function
	for _, fn := range a.Functions {
		if fn.IsFragment() {
			continue
		}
		if fn.Name == su.Function || fn.Demangled == su.Function || strings.HasSuffix(su.Function, " "+fn.Demangled) {
			found = append(found, fn)
		}
	}
	if len(found) == 1 {
		return found[0]
	}
	for _, fn := range found {
		if fn.File != "" && filepath.Base(fn.File) == filepath.Base(su.File) {
			return fn
		}
	}
	return nil
}
