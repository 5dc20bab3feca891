package check

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/ianlancetaylor/demangle"

	"github.com/memtrail/memtrail/internal/analysis"
)

// Suppression takes the blocks allocated from the call stacks it matches
// out of the in-use-at-exit budget. It is one of two kinds, as the tools
// people have suppression files for write them:
//
//   - LeakSanitizer's "leak:PATTERN" line: the pattern is matched against
//     the function, the source file and the object file of every frame;
//     it matches anywhere in them unless it starts with ^ or ends with $,
//     and * stands for any text.
//   - valgrind's "{ NAME / Memcheck:Leak / fun:... obj:... ... }" block:
//     its frame lines are matched against the innermost frames in order,
//     fun: against the function, obj: against the object file, with * and
//     ? as wildcards, and "..." for any number of frames. valgrind's first
//     frame is the allocation function itself (malloc, operator new),
//     which memtrail's stacks leave out: a block may start with it or not.
type Suppression struct {
	Name   string // valgrind's name, or the leak: line
	Source string // file:line where it begins
	lsan   string
	frames []framePattern
	// kinds are the leak classes of valgrind's match-leak-kinds line
	// (definite, indirect, possible, reachable); nil: all of them.
	kinds map[string]bool
}

// MatchesKind reports whether the suppression applies to blocks of a leak
// class: "definite", "indirect", "possible" or "reachable", as valgrind's
// match-leak-kinds names them. A LeakSanitizer line applies to all.
func (s *Suppression) MatchesKind(kind string) bool {
	return s.kinds == nil || s.kinds[kind]
}

type framePattern struct {
	kind    byte // 'f' fun:, 'o' obj:, '.' ...
	pattern string
}

// Parse reads the suppressions of a file in either format, or both. Blocks
// of valgrind's other kinds (Memcheck:Cond, Memcheck:Addr4...) are about
// other errors than leaks and are skipped. The error names the line.
func Parse(r io.Reader, file string) ([]*Suppression, error) {
	var sups []*Suppression
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	line := 0
	next := func() (string, bool) {
		for sc.Scan() {
			line++
			text := strings.TrimSpace(sc.Text())
			if text != "" && !strings.HasPrefix(text, "#") {
				return text, true
			}
		}
		return "", false
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", file, line, fmt.Sprintf(format, args...))
	}
	for {
		text, ok := next()
		if !ok {
			break
		}
		switch {
		case strings.HasPrefix(text, "leak:"):
			pattern := strings.TrimSpace(strings.TrimPrefix(text, "leak:"))
			if pattern == "" {
				return nil, fail("leak: needs a pattern")
			}
			sups = append(sups, &Suppression{Name: text, Source: fmt.Sprintf("%s:%d", file, line), lsan: pattern})
		case text == "{":
			source := fmt.Sprintf("%s:%d", file, line)
			s, keep, err := parseBlock(next, fail)
			if err != nil {
				return nil, err
			}
			s.Source = source
			if keep {
				sups = append(sups, s)
			}
		default:
			kind, _, _ := strings.Cut(text, ":")
			return nil, fail("%q is neither a leak:PATTERN line (LeakSanitizer) nor the { of a valgrind suppression (unknown kind %q)", text, kind)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return sups, nil
}

// parseBlock reads a valgrind suppression after its "{", and says whether
// it is a leak's.
func parseBlock(next func() (string, bool), fail func(string, ...any) error) (*Suppression, bool, error) {
	name, ok := next()
	if !ok || name == "}" {
		return nil, false, fail("a valgrind suppression needs a name, a Tool:Kind line and frames before }")
	}
	kind, ok := next()
	if !ok || !strings.Contains(kind, ":") || isFrameLine(kind) {
		return nil, false, fail("a valgrind suppression's second line is Tool:Kind (e.g. Memcheck:Leak), not %q", kind)
	}
	s := &Suppression{Name: name}
	for {
		text, ok := next()
		if !ok {
			return nil, false, fail("the valgrind suppression %q has no closing }", name)
		}
		switch {
		case text == "}":
			if len(s.frames) == 0 && kind == "Memcheck:Leak" {
				return nil, false, fail("the valgrind suppression %q has no frame lines", name)
			}
			return s, kind == "Memcheck:Leak", nil
		case strings.HasPrefix(text, "match-leak-kinds:"):
			// The in-use-at-exit budget counts every block whatever its
			// class; the budgets per class follow the kinds.
			kinds := map[string]bool{}
			for _, k := range strings.Split(strings.TrimSpace(strings.TrimPrefix(text, "match-leak-kinds:")), ",") {
				switch k = strings.TrimSpace(k); k {
				case "all":
					kinds = nil
				case "definite", "indirect", "possible", "reachable":
					if kinds != nil {
						kinds[k] = true
					}
				case "none":
				default:
					return nil, false, fail("unknown leak kind %q in match-leak-kinds (definite, indirect, possible, reachable, all, none)", k)
				}
			}
			s.kinds = kinds
		case text == "...":
			s.frames = append(s.frames, framePattern{kind: '.'})
		case strings.HasPrefix(text, "fun:"):
			s.frames = append(s.frames, framePattern{kind: 'f', pattern: demangled(strings.TrimPrefix(text, "fun:"))})
		case strings.HasPrefix(text, "obj:"):
			s.frames = append(s.frames, framePattern{kind: 'o', pattern: strings.TrimPrefix(text, "obj:")})
		default:
			if kind != "Memcheck:Leak" {
				continue // another tool's or kind's lines
			}
			return nil, false, fail("%q is not a frame line of a valgrind suppression (fun:, obj: or ...)", text)
		}
	}
}

// isFrameLine reports whether a line of a valgrind suppression is one of
// its frames.
func isFrameLine(text string) bool {
	return text == "..." || strings.HasPrefix(text, "fun:") || strings.HasPrefix(text, "obj:") || strings.HasPrefix(text, "src:")
}

// demangled returns the C++ name a mangled name without wildcards stands
// for, as memtrail writes functions; other names as they are.
func demangled(name string) string {
	if !strings.HasPrefix(name, "_Z") || strings.ContainsAny(name, "*?") {
		return name
	}
	if d, err := demangle.ToString(name); err == nil {
		return d
	}
	return name
}

// Matches reports whether the suppression matches a call stack, innermost
// frame first.
func (s *Suppression) Matches(frames []analysis.Frame) bool {
	if s.lsan != "" {
		for _, f := range frames {
			if lsanMatch(s.lsan, f.Function) || lsanMatch(s.lsan, f.File) || lsanMatch(s.lsan, f.Object) {
				return true
			}
		}
		return false
	}
	if matchFrames(s.frames, frames) {
		return true
	}
	// valgrind's stacks begin with the allocation function.
	return len(s.frames) > 0 && s.frames[0].matchesAllocator() && matchFrames(s.frames[1:], frames)
}

// allocators are the functions valgrind's leak stacks begin with.
var allocators = []string{"malloc", "calloc", "realloc", "memalign", "posix_memalign", "aligned_alloc",
	"valloc", "pvalloc", "operator new(unsigned long)", "operator new[](unsigned long)",
	"_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t"}

func (fp framePattern) matchesAllocator() bool {
	switch fp.kind {
	case 'f':
		for _, a := range allocators {
			if glob(fp.pattern, a) {
				return true
			}
		}
	case 'o':
		return strings.Contains(fp.pattern, "vgpreload")
	}
	return false
}

// matchFrames matches valgrind frame patterns against the innermost frames.
func matchFrames(pats []framePattern, frames []analysis.Frame) bool {
	if len(pats) == 0 {
		return true // a suppression may be shorter than the stack
	}
	p := pats[0]
	if p.kind == '.' {
		for i := 0; i <= len(frames); i++ {
			if matchFrames(pats[1:], frames[i:]) {
				return true
			}
		}
		return false
	}
	if len(frames) == 0 {
		return false
	}
	f := frames[0]
	var ok bool
	if p.kind == 'f' {
		ok = slices.ContainsFunc(names(f.Function), func(name string) bool { return glob(p.pattern, name) })
	} else {
		ok = f.Object != "" && (glob(p.pattern, f.Object) || glob(p.pattern, path.Base(f.Object)))
	}
	return ok && matchFrames(pats[1:], frames[1:])
}

// names returns the names a function may go by in a suppression: its own,
// and for glibc's internal names (__GI___strdup, which the debug info
// has) the exported ones that valgrind writes (__strdup, strdup).
func names(function string) []string {
	inner, ok := strings.CutPrefix(function, "__GI_")
	if !ok {
		return []string{function}
	}
	return []string{function, inner, strings.TrimLeft(inner, "_")}
}

// glob matches text against a pattern where * is any text and ? any one
// character, as valgrind's suppressions have them.
func glob(pattern, text string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for len(pattern) > 1 && pattern[1] == '*' {
				pattern = pattern[1:]
			}
			for i := 0; i <= len(text); i++ {
				if glob(pattern[1:], text[i:]) {
					return true
				}
			}
			return false
		case '?':
			if text == "" {
				return false
			}
			text = text[1:]
		default:
			if text == "" || text[0] != pattern[0] {
				return false
			}
			text = text[1:]
		}
		pattern = pattern[1:]
	}
	return text == ""
}

// lsanMatch matches text against a LeakSanitizer pattern: anywhere in it,
// unless anchored by ^ at its start or $ at its end; * is any text.
func lsanMatch(pattern, text string) bool {
	if text == "" {
		return false
	}
	if strings.HasPrefix(pattern, "^") {
		pattern = pattern[1:]
	} else {
		pattern = "*" + pattern
	}
	if strings.HasSuffix(pattern, "$") {
		pattern = pattern[:len(pattern)-1]
	} else {
		pattern += "*"
	}
	return glob(strings.ReplaceAll(pattern, "?", "\x00"), strings.ReplaceAll(text, "?", "\x00"))
}
