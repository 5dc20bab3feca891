package report

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memtrail/memtrail/internal/analysis"
)

// Request is what someone asks a report for, by the names of memtrail
// report's flags: the command line and the web UI's requests both make
// one, and Options checks it.
type Request struct {
	View, Cost, Order              string
	Threads                        string // thread indexes, comma-separated
	Function, File, Module, Ignore string // regular expressions on the call stacks
	Top, Frames, Chain             int
	From, To, At                   time.Duration
	// Given says which of the fields were given (by flag name: "from",
	// "to", "at"...): a window's end of 0 is an error only if given.
	Given map[string]bool
}

// The bounds of a request's counts: the memory of a report grows with
// them (the object list keeps four times -top objects while it is made),
// and a request, from the command line or the web, must not be able to
// ask for more memory than the machine has. A table longer than MaxTop
// is read better with export.
const (
	MaxTop    = 100_000
	MaxFrames = 1_000
	MaxChain  = 1_000
)

// Options checks the request and turns it into the options of the report
// and of the analysis. Its errors are one line, naming the flag.
func (r Request) Options() (Options, analysis.Options, error) {
	var opts Options
	var aopts analysis.Options
	if err := CheckView(r.View); err != nil {
		return opts, aopts, err
	}
	for _, n := range []struct {
		name     string
		v, bound int
	}{{"top", r.Top, MaxTop}, {"frames", r.Frames, MaxFrames}, {"chain", r.Chain, MaxChain}} {
		if n.v < 1 || n.v > n.bound {
			return opts, aopts, fmt.Errorf("-%s %d is out of range: -top, -frames and -chain must be at least 1, and at most %d, %d and %d",
				n.name, n.v, MaxTop, MaxFrames, MaxChain)
		}
	}
	cost, err := analysis.ParseCost(r.Cost)
	if err != nil {
		return opts, aopts, err
	}
	opts = Options{View: r.View, Top: r.Top, Frames: r.Frames, Cost: cost, Chain: r.Chain}
	switch r.Order {
	case "size":
		opts.Objects = BySize
	case "age":
		opts.Objects = ByAge
	case "lifetime":
		opts.Objects = ByLifetime
	default:
		return opts, aopts, fmt.Errorf("unknown order %q for -sort (orders: size, age, lifetime)", r.Order)
	}
	if aopts, err = r.window(); err != nil {
		return opts, aopts, err
	}
	switch r.View {
	case "objects":
		aopts.Objects = max(r.Top, analysis.DefaultObjects)
	case "heapmap":
		aopts.HeapMap = HeapMapCells
	}
	if aopts.Threads, err = threadList(r.Threads); err != nil {
		return opts, aopts, err
	}
	if aopts.Filter, err = r.stackFilter(); err != nil {
		return opts, aopts, err
	}
	return opts, aopts, nil
}

// window checks -from, -to and -at.
func (r Request) window() (analysis.Options, error) {
	var aopts analysis.Options
	given := r.Given
	if given["at"] && (given["from"] || given["to"]) {
		return aopts, fmt.Errorf("-at cannot go with -from or -to")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"from", r.From}, {"to", r.To}, {"at", r.At}} {
		if given[d.name] && d.v < 0 {
			return aopts, fmt.Errorf("-%s %v is negative: times count from the start of the process", d.name, d.v)
		}
	}
	if given["to"] && r.To == 0 || given["at"] && r.At == 0 {
		return aopts, fmt.Errorf("the window must end after the start of the process: nothing is allocated at 0")
	}
	if given["to"] && r.To < r.From {
		return aopts, fmt.Errorf("-to %v is before -from %v", r.To, r.From)
	}
	aopts.From, aopts.To = uint64(r.From), uint64(r.To)
	if given["at"] {
		aopts.From, aopts.To = uint64(r.At), uint64(r.At)
	}
	return aopts, nil
}

func threadList(s string) ([]uint64, error) {
	if s == "" {
		return nil, nil
	}
	var list []uint64
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(part), 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("-thread %q: a thread is a number from 1 (see -view threads)", part)
		}
		list = append(list, n)
	}
	return list, nil
}

func (r Request) stackFilter() (analysis.StackFilter, error) {
	var filter analysis.StackFilter
	for _, re := range []struct {
		name, expr string
		dst        **regexp.Regexp
	}{{"function", r.Function, &filter.Function}, {"file", r.File, &filter.File},
		{"module", r.Module, &filter.Module}, {"ignore", r.Ignore, &filter.Ignore}} {
		if re.expr == "" {
			continue
		}
		compiled, err := regexp.Compile(re.expr)
		if err != nil {
			return filter, fmt.Errorf("-%s: %v", re.name, err)
		}
		*re.dst = compiled
	}
	return filter, nil
}

// FilterWarnings says which of the filters of the analysis m (made with
// aopts) kept nothing, or left nothing out, in the process opts picks: a
// regular expression that no frame of the call stack of any allocation
// matched, a thread the process does not have, or filters that together
// keep none of its blocks. A report of such a filter would show empty
// tables and nothing to say why.
func FilterWarnings(m *analysis.Model, opts Options, aopts analysis.Options) []string {
	var warnings []string
	for _, f := range m.Filter().Fields() {
		if !slices.Contains(m.Unmatched, f.Name) {
			continue
		}
		flag := fmt.Sprintf("-%s %s", f.Name, shellQuote(f.Expr.String()))
		switch f.Name {
		case "ignore":
			warnings = append(warnings, flag+" matches no function in the call stacks of the allocations: it leaves nothing out")
		default:
			what := map[string]string{"function": "function", "file": "source file", "module": "object file"}[f.Name]
			warnings = append(warnings, fmt.Sprintf("%s matches no %s in the call stacks of the allocations: it keeps nothing", flag, what))
		}
	}
	p, err := pick(m, opts)
	if err != nil {
		return warnings
	}
	for _, th := range aopts.Threads {
		if th > uint64(len(p.Threads)) {
			warnings = append(warnings, fmt.Sprintf("-thread %d: process %d has %s", th, p.PID, Plural(uint64(len(p.Threads)), "thread")))
		}
	}
	if len(warnings) == 0 && (len(aopts.Threads) > 0 || !m.Filter().IsZero()) && len(p.Sites) == 0 {
		warnings = append(warnings, fmt.Sprintf("the filters together keep none of the blocks of process %d", p.PID))
	}
	return warnings
}
