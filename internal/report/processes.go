package report

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace"
)

// ProcessID names a process of a trace as the command line does (-pid):
// its pid and, for a pid that had several program images in turn (each
// exec starts one), which of them, counting from 1 in the order they
// started: 1234.2 is the image the first exec of 1234 started. Image 0
// stands for the last image, what the pid ended as.
type ProcessID struct {
	PID   uint64
	Image int
}

// ParseProcessID reads a process as -pid takes it: "1234" or "1234.2".
func ParseProcessID(s string) (ProcessID, error) {
	pid, image, dotted := strings.Cut(s, ".")
	var id ProcessID
	n, err := strconv.ParseUint(pid, 10, 64)
	if err != nil {
		return id, fmt.Errorf("%q is not a pid, nor a pid and an image such as 1234.2", s)
	}
	id.PID = n
	if dotted {
		k, err := strconv.ParseUint(image, 10, 31)
		if err != nil || k == 0 || n == 0 {
			return id, fmt.Errorf("%q: the image after the pid counts from 1, as in 1234.2", s)
		}
		id.Image = int(k)
	}
	return id, nil
}

func (id ProcessID) String() string {
	if id.Image == 0 {
		return strconv.FormatUint(id.PID, 10)
	}
	return fmt.Sprintf("%d.%d", id.PID, id.Image)
}

// listed bounds the processes a text names in a list, so that a trace of
// hundreds of processes keeps its report short; ProcessList lists them
// all.
const listed = 10

// morePointer says where the processes left out of a list are.
const morePointer = "memtrail report -processes lists them all"

// images indexes the processes of a model by pid (analysis.Images).
type images struct{ *analysis.Images }

func imagesOf(m *analysis.Model) images { return images{m.Images()} }

// id returns how -pid names p: its pid alone if no other process of the
// trace had it.
func (x images) id(p *analysis.Process) ProcessID {
	if k, n := x.Of(p); n > 1 {
		return ProcessID{PID: p.PID, Image: k}
	}
	return ProcessID{PID: p.PID}
}

// IDOf returns how -pid names p, a process of m: its pid alone if no
// other process of m had it, else with which image of the pid it is.
func IDOf(m *analysis.Model, p *analysis.Process) ProcessID {
	return imagesOf(m).id(p)
}

// image says which image of its pid p is, "image 2 of 3", if its pid had
// several; "" otherwise.
func (x images) image(p *analysis.Process) string {
	if k, n := x.Of(p); n > 1 {
		return fmt.Sprintf("image %d of %d", k, n)
	}
	return ""
}

// list names processes as id (program, end), at most listed of them.
func (x images) list(procs []*analysis.Process) string {
	var names []string
	for _, p := range procs[:min(len(procs), listed)] {
		names = append(names, fmt.Sprintf("%s (%s, %s)", x.id(p), truncate(commandLine(p), 40), ending(p)))
	}
	if len(procs) > listed {
		names = append(names, fmt.Sprintf("and %d more", len(procs)-listed))
	}
	return strings.Join(names, ", ")
}

// pick returns the process of m that opts asks for.
func pick(m *analysis.Model, opts Options) (*analysis.Process, error) {
	if len(m.Processes) == 0 {
		return nil, fmt.Errorf("the trace holds no process")
	}
	p := lastImage(m, 0)
	if opts.PID != 0 {
		var err error
		if p, err = pickID(m, ProcessID{PID: opts.PID, Image: opts.Image}); err != nil {
			return nil, err
		}
	}
	if p.Window.From > p.RunTime() {
		return nil, fmt.Errorf("the window starts %s after the start of process %s, which ran %s",
			Duration(p.Window.From), imagesOf(m).id(p), Duration(p.RunTime()))
	}
	return p, nil
}

// pickID returns the process id names. A pid alone names its last image;
// it is ambiguous if the system gave it to another process later.
func pickID(m *analysis.Model, id ProcessID) (*analysis.Process, error) {
	x := imagesOf(m)
	imgs := x.OfPID(id.PID)
	switch {
	case len(imgs) == 0:
		return nil, fmt.Errorf("process %d is not in this trace (processes: %s)", id.PID, pidList(m))
	case id.Image > len(imgs):
		return nil, fmt.Errorf("process %d had %s, so there is no %s: %s", id.PID, Plural(uint64(len(imgs)), "image"), id, x.list(imgs))
	case id.Image > 0:
		return imgs[id.Image-1], nil
	}
	last := lastImage(m, slices.Index(m.Processes, imgs[0]))
	reused := slices.ContainsFunc(imgs[1:], func(p *analysis.Process) bool { return p.Forked })
	if last != imgs[len(imgs)-1] || reused {
		return nil, fmt.Errorf("pid %d was given to several processes in this trace; choose one with -pid %d.N: %s", id.PID, id.PID, x.list(imgs))
	}
	return last, nil
}

// lastImage follows the process at index i of m through the execs that
// replaced its image, to the last image.
func lastImage(m *analysis.Model, i int) *analysis.Process {
	p := m.Processes[i]
	for _, next := range m.Processes[i+1:] {
		if !p.Ended || p.How != trace.EndExec {
			break
		}
		if next.PID == p.PID && !next.Forked {
			p = next
		}
	}
	return p
}

// pidList lists the PIDs of the processes of m, each once, in the order
// they started; at most listed of them.
func pidList(m *analysis.Model) string {
	seen := make(map[uint64]bool)
	var pids []string
	for _, p := range m.Processes {
		if !seen[p.PID] {
			seen[p.PID] = true
			pids = append(pids, fmt.Sprint(p.PID))
		}
	}
	if len(pids) > listed {
		pids = append(pids[:listed], fmt.Sprintf("and %d more; %s", len(pids)-listed, morePointer))
	}
	return strings.Join(pids, ", ")
}

// ProcessLabel names p, a process of m, for a message: "process 1234
// (./prog -v)", with which image it is if its pid had several: "process
// 1234.2 (./prog -v, image 2 of 2)".
func ProcessLabel(m *analysis.Model, p *analysis.Process) string {
	x := imagesOf(m)
	image := x.image(p)
	if image != "" {
		image = ", " + image
	}
	return fmt.Sprintf("process %s (%s%s)", x.id(p), truncate(commandLine(p), 60), image)
}

// imageNote says, of a process whose pid had several images, which one it
// is and how -pid names it and the others: " (image 2 of 3, -pid 1234.2;
// the others: -pid 1234.1, -pid 1234.3)"; "" otherwise. A pid alone names
// its last image, so a reader needs the others' names to see them.
func imageNote(m *analysis.Model, p *analysis.Process) string {
	x := imagesOf(m)
	image := x.image(p)
	if image == "" {
		return ""
	}
	var others []string
	for _, q := range x.OfPID(p.PID) {
		if q != p {
			others = append(others, "-pid "+x.id(q).String())
		}
	}
	return fmt.Sprintf(" (%s, -pid %s; the others: %s)", image, x.id(p), strings.Join(others, ", "))
}

// otherProcesses lists the processes of the trace other than the one
// reported on: those of the highest peaks, at most listed of them.
func (t *textReport) otherProcesses() {
	if len(t.m.Processes) < 2 {
		return
	}
	others := slices.DeleteFunc(slices.Clone(t.m.Processes), func(p *analysis.Process) bool { return p == t.p })
	title := "Other processes in this trace; " + t.seeOne(others)
	if len(others) > listed {
		slices.SortStableFunc(others, func(a, b *analysis.Process) int {
			return cmp.Compare(b.Summary.PeakBytes, a.Summary.PeakBytes)
		})
		others = others[:listed]
		title = fmt.Sprintf("Other processes in this trace: the %d of %d with the highest peaks (%s); %s",
			listed, len(t.m.Processes)-1, morePointer, t.seeOne(others))
	}
	t.printf("\n%s\n", title)
	t.processTable(others)
}

// seeOne says how to see one of the processes of a table: with its first
// column as -pid, for which it gives an example, an image of a pid that
// exec'd if there is one, as a pid alone names the last.
func (t *textReport) seeOne(procs []*analysis.Process) string {
	x := imagesOf(t.m)
	example := x.id(procs[0])
	for _, p := range procs {
		if id := x.id(p); id.Image != 0 {
			example = id
			break
		}
	}
	return fmt.Sprintf("see one with memtrail report and the -pid of its first column (e.g. -pid %s)", example)
}

// processTable writes a table of processes, the first column as -pid
// names each.
func (t *textReport) processTable(procs []*analysis.Process) {
	x := imagesOf(t.m)
	rows := [][]string{{"-pid", "program", "allocations", "peak", "end"}}
	for _, p := range procs {
		rows = append(rows, []string{x.id(p).String(), truncate(commandLine(p), 32),
			Count(p.Summary.Allocations), Size(p.Summary.PeakBytes), ending(p)})
	}
	t.table(rows, []bool{true, false, true, true, false})
}

// ProcessList writes every process of m, named as -pid names them, as
// text or as JSON.
func ProcessList(w io.Writer, m *analysis.Model, asJSON bool) error {
	if asJSON {
		return writeJSON(w, struct {
			Processes []jsonProcess `json:"processes"`
			Warnings  []string      `json:"warnings"`
		}{jsonProcesses(m, nil), orEmpty(m.AllWarnings())})
	}
	t := &textReport{m: m}
	t.warnings()
	if len(m.Processes) == 0 {
		t.printf("Processes in this trace (0)\n  none\n")
	} else {
		t.printf("Processes in this trace (%d); %s\n", len(m.Processes), t.seeOne(m.Processes))
		t.processTable(m.Processes)
	}
	_, err := io.WriteString(w, t.b.String())
	return err
}
