package analysis

import "regexp"

// StackFilter selects call stacks by their frames. A stack passes if, for
// each of Function, File and Module that is set, one of its frames
// matches it, and none of its frames' functions matches Ignore. The zero
// StackFilter passes every stack.
type StackFilter struct {
	Function *regexp.Regexp // a frame's function name (Frame.Name)
	File     *regexp.Regexp // a frame's source file
	Module   *regexp.Regexp // the path of a frame's object
	Ignore   *regexp.Regexp // a function name that excludes the stack
}

// IsZero reports whether f passes every stack.
func (f StackFilter) IsZero() bool {
	return f.Function == nil && f.File == nil && f.Module == nil && f.Ignore == nil
}

// Pass reports whether a stack with these frames passes f.
func (f StackFilter) Pass(frames []Frame) bool {
	if f.IsZero() {
		return true
	}
	return f.passes(f.matches(frames))
}

// fieldMatches says which expressions of a StackFilter matched a frame of
// a stack, in the order of filterFields.
type fieldMatches [4]bool

// matches returns which of the expressions of f match a frame of frames.
func (f StackFilter) matches(frames []Frame) fieldMatches {
	var m fieldMatches
	for _, fr := range frames {
		name := fr.Name()
		m[0] = m[0] || f.Function != nil && f.Function.MatchString(name)
		m[1] = m[1] || f.File != nil && fr.File != "" && f.File.MatchString(fr.File)
		m[2] = m[2] || f.Module != nil && fr.Object != "" && f.Module.MatchString(fr.Object)
		m[3] = m[3] || f.Ignore != nil && f.Ignore.MatchString(name)
	}
	return m
}

// passes reports whether a stack whose frames matched m passes f.
func (f StackFilter) passes(m fieldMatches) bool {
	return (f.Function == nil || m[0]) && (f.File == nil || m[1]) && (f.Module == nil || m[2]) && !m[3]
}

// unmatched returns the names of the expressions of f that matched no
// stack, given which did.
func (f StackFilter) unmatched(matched fieldMatches) []string {
	var names []string
	for i, name := range filterFields {
		if *f.field(name) != nil && !matched[i] {
			names = append(names, name)
		}
	}
	return names
}

// FilterField is one regular expression of a StackFilter, and the name
// of the field that holds it (function, file, module or ignore).
type FilterField struct {
	Name string
	Expr *regexp.Regexp
}

// filterFields names the fields of a StackFilter.
var filterFields = []string{"function", "file", "module", "ignore"}

// field returns where f holds the expression of the field called name, or
// nil if it has no such field.
func (f *StackFilter) field(name string) **regexp.Regexp {
	switch name {
	case "function":
		return &f.Function
	case "file":
		return &f.File
	case "module":
		return &f.Module
	case "ignore":
		return &f.Ignore
	}
	return nil
}

// Fields returns the regular expressions of f that are set.
func (f StackFilter) Fields() []FilterField {
	var set []FilterField
	for _, name := range filterFields {
		if re := *f.field(name); re != nil {
			set = append(set, FilterField{name, re})
		}
	}
	return set
}

// SiteList returns pointers to the sites of p, in their order.
func (p *Process) SiteList() []*Site {
	sites := make([]*Site, len(p.Sites))
	for i := range p.Sites {
		sites[i] = &p.Sites[i]
	}
	return sites
}
