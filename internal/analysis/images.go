package analysis

import "fmt"

// Images numbers the program images of a model's processes by pid: a pid
// that exec'd, or that a zygote forked and that exec'd itself again, had
// one Process per image, counted from 1 in the order they started. The
// command line's -pid names them so ("1234.2"), and so do the warnings.
type Images struct {
	byPID  map[uint64][]*Process
	number map[*Process]int // from 1
}

// Images numbers the images of m's processes.
func (m *Model) Images() *Images {
	x := &Images{byPID: make(map[uint64][]*Process), number: make(map[*Process]int, len(m.Processes))}
	for _, p := range m.Processes {
		x.byPID[p.PID] = append(x.byPID[p.PID], p)
		x.number[p] = len(x.byPID[p.PID])
	}
	return x
}

// Of returns which image of its pid p is, from 1, and how many the pid
// had.
func (x *Images) Of(p *Process) (k, n int) {
	return x.number[p], len(x.byPID[p.PID])
}

// OfPID returns the images pid had, in the order they started.
func (x *Images) OfPID(pid uint64) []*Process { return x.byPID[pid] }

// name is how a warning names p: "pid 1234", or "pid 1234.2" for its
// second image when the pid had several.
func (x *Images) name(p *Process) string {
	if k, n := x.Of(p); n > 1 {
		return fmt.Sprintf("pid %d.%d", p.PID, k)
	}
	return fmt.Sprintf("pid %d", p.PID)
}
