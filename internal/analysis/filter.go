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
	function, file, module := f.Function == nil, f.File == nil, f.Module == nil
	for _, fr := range frames {
		name := fr.Name()
		if f.Ignore != nil && f.Ignore.MatchString(name) {
			return false
		}
		function = function || f.Function.MatchString(name)
		file = file || (fr.File != "" && f.File.MatchString(fr.File))
		module = module || (fr.Object != "" && f.Module.MatchString(fr.Object))
	}
	return function && file && module
}

// FilterSites returns the sites of p whose stacks pass f, in the order of
// p.Sites.
func (p *Process) FilterSites(f StackFilter) []*Site {
	sites := make([]*Site, 0, len(p.Sites))
	for i := range p.Sites {
		s := &p.Sites[i]
		if f.IsZero() || f.Pass(p.SiteStack(s)) {
			sites = append(sites, s)
		}
	}
	return sites
}
