package export

import (
	"archive/zip"
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace"
)

// Format is a format export writes: what memtrail export -format lists,
// the web UI downloads and the shell completes.
type Format struct {
	Name string
	// Summary says what it writes and which tools read it.
	Summary string
	// Suffix ends the name of a file of it, after the trace's name; a
	// format of several tables is downloaded as a zip of them.
	Suffix, ContentType string
	// Options are the options of a Job that the format reads, by the
	// names of memtrail export's flags: "at" (pprof) and "cost"
	// (collapsed).
	Options []string
	// Tables are the files a format of several writes, into a directory;
	// nil for a format of one file.
	Tables []string

	write       func(w io.Writer, j Job) error
	writeTables func(tables []io.Writer, j Job) error
}

// Formats are the formats export writes.
var Formats = []Format{
	{Name: "pprof", Summary: "a gzipped pprof profile (go tool pprof, Pyroscope, Parca)",
		Suffix: ".pb.gz", ContentType: "application/gzip", Options: []string{"at"},
		write: func(w io.Writer, j Job) error { return PProf(w, j.Model.Info, j.Process, j.inUse()) }},
	{Name: "collapsed", Summary: "collapsed stacks weighed by a cost (flamegraph.pl, speedscope)",
		Suffix: ".folded", ContentType: "text/plain; charset=utf-8", Options: []string{"cost"},
		write: func(w io.Writer, j Job) error { return Collapsed(w, j.Process, j.Cost) }},
	{Name: "massif", Summary: "valgrind massif's massif.out (ms_print, massif-visualizer)",
		Suffix: ".massif.out", ContentType: "text/plain; charset=utf-8",
		write: func(w io.Writer, j Job) error { return Massif(w, j.Process) }},
	{Name: "parquet", Summary: "Parquet tables of the events and their call stacks (DuckDB, Spark, Trino, ClickHouse)",
		Suffix: ".parquet.zip", ContentType: "application/zip", Tables: []string{"events.parquet", "stacks.parquet"},
		writeTables: writeParquetTables},
}

// Job is what to export besides the format.
type Job struct {
	// Trace is the path of the trace, which Parquet reads again for its
	// events; Model is its analysis.
	Trace string
	Model *analysis.Model
	// Process is the process exported by the formats of one process;
	// PID, if not 0, keeps Parquet's events to the processes of that pid.
	Process *analysis.Process
	PID     uint64
	// InUse is the moment pprof's inuse samples count; the zero InUse
	// is the exit.
	InUse InUse
	// Cost weighs the collapsed stacks.
	Cost analysis.Cost
}

func (j Job) inUse() InUse {
	if j.InUse.of == nil {
		return InUseAtExit()
	}
	return j.InUse
}

// FormatNamed returns the format of that name, or an error that lists the
// formats.
func FormatNamed(name string) (Format, error) {
	for _, f := range Formats {
		if f.Name == name {
			return f, nil
		}
	}
	return Format{}, fmt.Errorf("unknown format %q (formats: %s)", name, FormatNames())
}

// FormatNames lists the names of the formats: "pprof, collapsed, ...".
func FormatNames() string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// WriteTables writes the tables of a format of several, in the order of
// f.Tables.
func (f Format) WriteTables(tables []io.Writer, j Job) error {
	if f.writeTables == nil || len(tables) != len(f.Tables) {
		return fmt.Errorf("format %s writes %d tables, not %d", f.Name, len(f.Tables), len(tables))
	}
	return f.writeTables(tables, j)
}

// Write writes j in the format to w; a format of several tables as a zip
// of them, each stored whole under its name.
func (f Format) Write(w io.Writer, j Job) error {
	if f.write != nil {
		return f.write(w, j)
	}
	return f.writeZip(w, j)
}

// writeZip writes the tables into temporary files first: they are written
// at once, and a zip holds one file after the other.
func (f Format) writeZip(w io.Writer, j Job) error {
	files := make([]*os.File, len(f.Tables))
	bufs := make([]*bufio.Writer, len(f.Tables))
	tables := make([]io.Writer, len(f.Tables))
	for i := range f.Tables {
		tmp, err := os.CreateTemp("", "memtrail-"+f.Name+"-")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		defer tmp.Close()
		files[i], bufs[i] = tmp, bufio.NewWriter(tmp)
		tables[i] = bufs[i]
	}
	if err := f.WriteTables(tables, j); err != nil {
		return err
	}
	zw := zip.NewWriter(w)
	for i, name := range f.Tables {
		if err := bufs[i].Flush(); err != nil {
			return err
		}
		if _, err := files[i].Seek(0, io.SeekStart); err != nil {
			return err
		}
		// Parquet is compressed already: stored, not deflated.
		e, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		if err != nil {
			return err
		}
		if _, err := io.Copy(e, files[i]); err != nil {
			return err
		}
	}
	return zw.Close()
}

// writeParquetTables reads the trace again for Parquet's events and
// stacks tables.
func writeParquetTables(tables []io.Writer, j Job) error {
	tf, err := os.Open(j.Trace)
	if err != nil {
		return err
	}
	defer tf.Close()
	r, err := trace.NewReader(bufio.NewReaderSize(tf, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", j.Trace, err)
	}
	_, err = Parquet(tables[0], tables[1], r, j.Model, j.PID)
	return err
}
