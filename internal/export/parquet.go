package export

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace"
)

// EventRow is a row of the events table of a Parquet export: one memory
// event of the trace. Numbers are signed, as most query engines read
// Parquet's integers best: no address or size of a process comes near
// 2^63.
type EventRow struct {
	TimeNS  int64  `parquet:"time_ns,delta"` // ns since the recording began (the trace's time zero)
	Process int64  `parquet:"process"`       // the trace's process ID: a new one after each exec
	PID     int64  `parquet:"pid"`
	Thread  int64  `parquet:"thread"` // index within its process, from 1
	Kind    string `parquet:"kind,dict"`
	API     string `parquet:"api,dict"`
	Address int64  `parquet:"address"` // of the block allocated or freed; the new one of a realloc
	// OldAddress is the block a realloc was given; null for the others.
	OldAddress *int64 `parquet:"old_address,optional"`
	Size       int64  `parquet:"size"` // requested; 0 for a free
	StackID    int64  `parquet:"stack_id"`
}

// FrameRow is a row of the stacks table: one frame of one call stack.
type FrameRow struct {
	Process  int64  `parquet:"process"`
	StackID  int64  `parquet:"stack_id"`
	Depth    int64  `parquet:"depth"` // 0 for the innermost frame, the allocator's caller
	Function string `parquet:"function,dict"`
	File     string `parquet:"file,dict"`
	Line     int64  `parquet:"line"`
	Object   string `parquet:"object,dict"`
	Inlined  bool   `parquet:"inlined"` // inlined into the frame at depth+1
}

// parquetBatch is how many rows are handed to the writer at once, and
// parquetRowGroup how many make a row group, written out when complete:
// that bounds what an export holds in memory, however long the trace.
const (
	parquetBatch    = 8192
	parquetRowGroup = 128 << 10
)

// ParquetCounts says how many rows a Parquet export wrote.
type ParquetCounts struct {
	Events, Frames int64
}

// Parquet writes the memory events that r reads from a trace to events,
// and the frames of their call stacks to stacks, as two Parquet tables.
// m is the analysis of the same trace, for its symbols: stacks are
// resolved only at the end of a trace. If pid is not 0, only the events
// of the processes with that pid are written.
//
// The events stream from r to events in row groups of parquetRowGroup:
// memory grows with the distinct call stacks, never with the events.
func Parquet(events, stacks io.Writer, r *trace.Reader, m *analysis.Model, pid uint64) (ParquetCounts, error) {
	var counts ParquetCounts
	ew := newTable[EventRow](events, "events")
	pids := make(map[uint64]uint64)          // by process ID
	used := make(map[uint64]map[uint64]bool) // stack IDs, by process ID
	for {
		batch, rec, err := r.NextBatch()
		if err != nil {
			var damage *trace.DamageError
			if errors.Is(err, io.EOF) {
				break
			}
			if errors.As(err, &damage) || errors.Is(err, trace.ErrIncomplete) {
				// What could be read is written; the analysis says
				// what was lost.
				continue
			}
			return counts, err
		}
		if rec.Kind == trace.KindProcessStart {
			pids[rec.Process.ID] = rec.Process.PID
		}
		for i := range batch {
			e := &batch[i]
			if pid != 0 && pids[e.Process] != pid {
				continue
			}
			if err := ew.add(eventRow(e, pids[e.Process])); err != nil {
				return counts, err
			}
			if used[e.Process] == nil {
				used[e.Process] = make(map[uint64]bool)
			}
			used[e.Process][e.Stack] = true
		}
	}
	var err error
	if counts.Events, err = ew.close(); err != nil {
		return counts, err
	}
	counts.Frames, err = writeStacks(stacks, m, used)
	return counts, err
}

var eventKinds = map[trace.Kind]string{trace.KindAlloc: "alloc", trace.KindFree: "free", trace.KindRealloc: "realloc"}

func eventRow(e *trace.Event, pid uint64) EventRow {
	row := EventRow{
		TimeNS: int64(e.Time), Process: int64(e.Process), PID: int64(pid), Thread: int64(e.Thread),
		Kind: eventKinds[e.Kind], API: e.API.String(), Address: int64(e.Addr), Size: int64(e.Size),
		StackID: int64(e.Stack),
	}
	if e.Kind == trace.KindRealloc {
		old := int64(e.OldAddr)
		row.OldAddress = &old
	}
	return row
}

// writeStacks writes the frames of the stacks used by the processes of m
// to w, by process and stack ID, and returns how many.
func writeStacks(w io.Writer, m *analysis.Model, used map[uint64]map[uint64]bool) (int64, error) {
	sw := newTable[FrameRow](w, "stacks")
	for _, p := range m.Processes {
		ids := make([]uint64, 0, len(used[p.ID]))
		for id := range used[p.ID] {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			for depth, f := range p.Stack(id) {
				err := sw.add(FrameRow{
					Process: int64(p.ID), StackID: int64(id), Depth: int64(depth), Function: f.Name(),
					File: f.File, Line: int64(f.Line), Object: f.Object, Inlined: f.Inlined,
				})
				if err != nil {
					return 0, err
				}
			}
		}
	}
	return sw.close()
}

// table writes the rows of a Parquet table, parquetBatch at a time.
type table[T any] struct {
	name string
	w    *parquet.GenericWriter[T]
	rows []T
	n    int64
}

func newTable[T any](w io.Writer, name string) *table[T] {
	return &table[T]{
		name: name,
		w: parquet.NewGenericWriter[T](w, parquet.Compression(&parquet.Zstd),
			parquet.MaxRowsPerRowGroup(parquetRowGroup), parquet.CreatedBy("memtrail", "", "")),
		rows: make([]T, 0, parquetBatch),
	}
}

func (t *table[T]) add(row T) error {
	t.rows = append(t.rows, row)
	if len(t.rows) < parquetBatch {
		return nil
	}
	return t.write()
}

func (t *table[T]) write() error {
	if _, err := t.w.Write(t.rows); err != nil {
		return fmt.Errorf("writing the %s table: %w", t.name, err)
	}
	t.n += int64(len(t.rows))
	t.rows = t.rows[:0]
	return nil
}

// close writes the rows left and the table's footer, and returns how
// many rows the table has.
func (t *table[T]) close() (int64, error) {
	if err := t.write(); err != nil {
		return t.n, err
	}
	if err := t.w.Close(); err != nil {
		return t.n, fmt.Errorf("writing the %s table: %w", t.name, err)
	}
	return t.n, nil
}
