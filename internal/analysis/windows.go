package analysis

import (
	"bufio"
	"io"
	"os"
	"runtime"
	"sync"

	"github.com/memtrail/memtrail/internal/trace"
)

// Windows makes the analysis of any window of a trace quick, however long
// the window, for the web UI, which asks for window after window:
//
//  1. It keeps checkpoints, the state of the replay every so often (see
//     Checkpoints).
//  2. It analyzes each stretch of the trace between two checkpoints once,
//     with a window open over all of it.
//  3. A window that takes in whole stretches is then its first part (from
//     the latest checkpoint before it opens to the next checkpoint), those
//     stretches and its last part (from the latest checkpoint before it
//     closes), put together (join). Only the two parts are replayed, side
//     by side: at most two stretches of the trace, whatever the window.
//  4. Any other window is replayed from the latest checkpoint before it
//     (AnalyzeFrom).
//
// A window put together is the model a direct analysis of it makes, but
// for its timeline, whose steps are made of the steps of the parts: an
// event near the edge of a step may be counted in the step beside it.
//
// Stretches are made for a trace of one process that is complete and
// whole, and only while their call stacks take less than maxStretchBytes.
type Windows struct {
	path  string
	whole *Model
	cps   []*Checkpoint
	// stretches[i] is the analysis of the trace from cps[i] to cps[i+1],
	// without its stacks and live objects (see strip).
	stretches []*Model
}

// stretchObjects is how many objects the stretches keep in their lists of
// freed objects: a window put together may ask for as many.
const stretchObjects = 1000

// maxStretchBytes bounds what the stretches hold, at siteBytes a site.
const (
	maxStretchBytes = 256 << 20
	siteBytes       = 600
)

// NewWindows prepares the analysis of windows of the trace file at path,
// of which whole is the analysis of all of it (with no options), making
// checkpoints every so many events while the memory they hold stays under
// maxBytes (see Checkpoints). It reads the trace twice.
func NewWindows(path string, whole *Model, every, maxBytes uint64) (*Windows, error) {
	cps, err := CheckpointsOfFile(path, every, maxBytes)
	if err != nil {
		return nil, err
	}
	w := &Windows{path: path, whole: whole, cps: cps}
	if !w.joinable() || len(cps) < 2 {
		return w, nil
	}
	if uint64(len(whole.Processes[0].Sites))*uint64(len(cps))*siteBytes > maxStretchBytes {
		return w, nil
	}
	stretches := make([]*Model, len(cps)-1)
	errs := make([]error, len(stretches))
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				opts := Options{Objects: stretchObjects, Stacks: whole}
				if stretches[i], errs[i] = w.part(cps[i], cps[i+1], opts); stretches[i] != nil {
					strip(stretches[i])
				}
			}
		})
	}
	for i := range stretches {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	w.stretches = stretches
	return w, nil
}

// Checkpoints returns how many checkpoints windows may start from.
func (w *Windows) Checkpoints() int { return len(w.cps) }

// Stretches returns how many stretches windows may be put together from.
func (w *Windows) Stretches() int { return len(w.stretches) }

// joinable reports whether windows of the trace may be put together from
// parts: it is complete and sound, of one process that did not fork from
// another.
func (w *Windows) joinable() bool {
	m := w.whole
	return m.Complete && len(m.Warnings) == 0 && len(m.Processes) == 1 && !m.Processes[0].Forked
}

// strip drops from the analysis of a stretch what join does not take from
// it: its stacks, its live objects and heap map.
func strip(m *Model) {
	p := m.Processes[0]
	p.stacks, p.LiveObjects, p.OldestObjects, p.HeapMap = nil, nil, nil, nil
}

// Analyze analyzes the window of opts: put together from parts if it
// takes in a whole stretch, else from the latest checkpoint before it,
// else from the start (through the cache, see AnalyzeFile).
func (w *Windows) Analyze(opts Options) (*Model, error) {
	if opts.To != 0 && opts.Filter.IsZero() && w.whole.Complete && len(w.whole.Warnings) == 0 {
		opts.Stacks = w.whole // a window stops reading at its end
	}
	if m, ok, err := w.join(opts); ok {
		return m, err
	}
	for i := len(w.cps) - 1; i >= 0; i-- {
		if w.cps[i].Fits(opts) {
			return AnalyzeFileFrom(w.path, w.cps[i], opts)
		}
	}
	m, _, err := AnalyzeFile(w.path, opts)
	return m, err
}

// join analyzes the window of opts from parts, if it can (see Windows).
//
//  1. first is the latest checkpoint the window opens after (none: the
//     start of the trace); the window is open at the checkpoint after it,
//     cps[first+1], since that one does not fit.
//  2. last is the latest checkpoint before which every event is in the
//     window, whose end is after all of them.
//  3. The window is its first part, from first to first+1 with the window's
//     start; the stretches from first+1 to last; and its last part, from
//     last with the window's end.
func (w *Windows) join(opts Options) (*Model, bool, error) {
	if len(w.stretches) == 0 || opts.To == 0 || opts.Stacks != w.whole || len(opts.Threads) > 0 || !opts.Filter.IsZero() ||
		opts.objects() > stretchObjects {
		return nil, false, nil
	}
	first := -1
	for i, cp := range w.cps {
		if cp.Fits(opts) {
			first = i
		}
	}
	start := w.whole.Processes[0].Start
	last := -1
	for i, cp := range w.cps {
		if rp := cp.a.order; len(rp) == 1 && rp[0].lastTime <= start+opts.To {
			last = i
		}
	}
	if last < first+1 || last > len(w.stretches) {
		return nil, false, nil
	}
	var head, tail *Model
	var headErr, tailErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		var from *Checkpoint
		if first >= 0 {
			from = w.cps[first]
		}
		head, headErr = w.part(from, w.cps[first+1], Options{From: opts.From, Objects: opts.Objects, Stacks: w.whole})
	})
	tail, tailErr = w.part(w.cps[last], nil, Options{To: opts.To, Objects: opts.Objects, HeapMap: opts.HeapMap, Stacks: w.whole})
	wg.Wait()
	if headErr != nil {
		return nil, true, headErr
	}
	if tailErr != nil {
		return nil, true, tailErr
	}
	parts := append([]*Model{head}, w.stretches[first+1:last]...)
	return joinParts(append(parts, tail), opts.objects()), true, nil
}

// part analyzes the trace from checkpoint from (nil: from its start) to
// checkpoint to (nil: to the end of the window of opts). With from set
// and opts.From 0, the window opens at from, whatever the time.
func (w *Windows) part(from, to *Checkpoint, opts Options) (*Model, error) {
	f, err := os.Open(w.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var a *analyzer
	var r *trace.Reader
	if from == nil {
		if r, err = trace.NewReader(bufio.NewReaderSize(f, 1<<20)); err != nil {
			return nil, err
		}
		a = newAnalyzer(opts)
	} else {
		if _, err := f.Seek(from.at.Offset, io.SeekStart); err != nil {
			return nil, err
		}
		r = trace.NewReaderAt(bufio.NewReaderSize(f, 1<<20), from.at)
		a = from.resume(opts)
		if opts.From == 0 {
			for _, rp := range a.order {
				rp.openWindow(rp.lastTime)
			}
		}
	}
	if to != nil {
		a.stops, a.stopAt = true, to.at.Offset
	}
	return a.run(r)
}

// finishAtStop completes the model of a stretch read to its end (see
// analyzer.stops): the window closes with the latest event read.
func (a *analyzer) finishAtStop() *Model {
	for _, rp := range a.order {
		a.opts.To = max(a.opts.To, rp.sinceStart(rp.lastTime), 1)
	}
	return a.finishFrom(a.opts.Stacks)
}
