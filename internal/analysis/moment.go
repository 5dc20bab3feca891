package analysis

import (
	"errors"
	"io"
	"os"

	"github.com/memtrail/memtrail/internal/trace"
)

// Moment is what a process did in a stretch of its run: its memory events
// there, the first Limit of them.
type Moment struct {
	From, To uint64        // ns after the process started, both included
	Count    uint64        // the events in it
	Events   []trace.Event // the first of them, at most the limit asked for
}

// EventsBetween reads the trace at path for the memory events of process
// p (of an analysis of that trace) from ns after its start to to, both
// included, and keeps the first limit of them. It reads the trace from
// its start to the end of the stretch: it is for the short stretches a
// click on a timeline picks.
func EventsBetween(path string, p *Process, from, to uint64, limit int) (*Moment, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		return nil, err
	}
	mo := &Moment{From: from, To: to}
	for {
		events, _, err := r.NextBatch()
		if errors.Is(err, io.EOF) {
			return mo, nil
		}
		var damage *trace.DamageError
		switch {
		case errors.Is(err, trace.ErrIncomplete):
			return mo, nil
		case err != nil && !errors.As(err, &damage):
			return nil, err
		}
		for i := range events {
			e := &events[i]
			if e.Process != p.ID {
				continue
			}
			// Times before the process's start (its first events may
			// come before its start record) count as its start, as in
			// the replay.
			t := max(e.Time, p.Start) - p.Start
			if t < from {
				continue
			}
			if t > to {
				// Events come in time order.
				return mo, nil
			}
			mo.Count++
			if len(mo.Events) < limit {
				mo.Events = append(mo.Events, *e)
			}
		}
	}
}
