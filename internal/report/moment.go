package report

import (
	"io"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace"
)

// PickID returns the process of m that id names (see ProcessID), as the
// reports pick it: the zero ID is the program itself, the trace's first
// process or the image that replaced it; a pid the system gave to several
// processes of the trace is an error that lists them.
func PickID(m *analysis.Model, id ProcessID) (*analysis.Process, error) {
	return pick(m, Options{PID: id.PID, Image: id.Image})
}

type jsonMoment struct {
	FromNS uint64            `json:"from_ns"` // since the process started
	ToNS   uint64            `json:"to_ns"`
	Count  uint64            `json:"count"`  // the events in the stretch
	Events []jsonMomentEvent `json:"events"` // the first of them
}

type jsonMomentEvent struct {
	TimeNS     uint64      `json:"time_ns"` // since the process started
	Kind       string      `json:"kind"`    // alloc, free or realloc
	API        string      `json:"api"`
	Address    string      `json:"address"`
	OldAddress string      `json:"old_address,omitempty"` // of a realloc
	Size       uint64      `json:"size"`
	Thread     uint64      `json:"thread"`
	Stack      []jsonFrame `json:"stack"`
}

// MomentJSON writes the events of process p in a stretch of its run as
// JSON.
func MomentJSON(w io.Writer, p *analysis.Process, mo *analysis.Moment) error {
	j := jsonMoment{FromNS: mo.From, ToNS: mo.To, Count: mo.Count, Events: make([]jsonMomentEvent, 0, len(mo.Events))}
	for _, e := range mo.Events {
		ev := jsonMomentEvent{TimeNS: sinceStart(p, e.Time), Kind: kindName(e.Kind), API: e.API.String(),
			Address: hex(e.Addr), Size: e.Size, Thread: e.Thread, Stack: jsonStack(p, e.Stack)}
		if e.Kind == trace.KindRealloc {
			ev.OldAddress = hex(e.OldAddr)
		}
		j.Events = append(j.Events, ev)
	}
	return writeJSON(w, j)
}

func kindName(k trace.Kind) string {
	switch k {
	case trace.KindAlloc:
		return "alloc"
	case trace.KindFree:
		return "free"
	}
	return "realloc"
}
