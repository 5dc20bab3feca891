package analysis

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/memtrail/memtrail/internal/trace"
)

// withTrace opens the trace file at path and returns what read makes of
// a Reader of it.
func withTrace[T any](path string, read func(*trace.Reader) (T, error)) (T, error) {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		return zero, err
	}
	defer f.Close()
	r, err := trace.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return read(r)
}

// AnalyzeTrace reads the trace file at path and analyzes it, without the
// cache (see AnalyzeFile).
func AnalyzeTrace(path string, opts Options) (*Model, error) {
	if opts.Progress == nil {
		return withTrace(path, func(r *trace.Reader) (*Model, error) { return Analyze(r, opts) })
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var size int64
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	r, err := trace.NewReader(bufio.NewReaderSize(withProgress(f, size, opts.Progress), 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, err := Analyze(r, opts)
	opts.Progress(1, 1)
	return m, err
}

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
	return withTrace(path, func(r *trace.Reader) (*Moment, error) { return eventsBetween(r, p, from, to, limit) })
}

func eventsBetween(r *trace.Reader, p *Process, from, to uint64, limit int) (*Moment, error) {
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
			// The replay starts a process no later than its first event
			// (see replay.events): no event comes before its start.
			t := e.Time - p.Start
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
