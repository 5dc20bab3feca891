package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/export"
	"github.com/memtrail/memtrail/internal/report"
	"github.com/memtrail/memtrail/internal/trace"
)

// exportFormat is a format memtrail export writes.
type exportFormat struct {
	name, summary string
	// flags are the options that go with the format, besides -format, -o
	// and -pid.
	flags []string
	// write writes the format to w; writeDir, of a format made of
	// several files, writes them into the directory dir. It exports all
	// the processes of the trace, or those with -pid's.
	write    func(x *exportJob, w io.Writer) error
	writeDir func(x *exportJob, dir string) error
}

func exportFormats() []exportFormat {
	return []exportFormat{
		{"pprof", "a gzipped pprof profile (go tool pprof, Pyroscope, Parca)", []string{"at"}, writePProf, nil},
		{"collapsed", "collapsed stacks (flamegraph.pl, speedscope), by -cost", []string{"cost"}, writeCollapsed, nil},
		{"massif", "valgrind massif's massif.out (ms_print, massif-visualizer)", nil, writeMassif, nil},
		{"parquet", "Parquet tables events.parquet and stacks.parquet in the directory -o (DuckDB, Spark, Trino, ClickHouse)", nil, nil, writeParquet},
	}
}

// exportJob is what one memtrail export was asked to do, and the analysis
// it works on.
type exportJob struct {
	trace string
	pid   report.ProcessID
	at    string // pprof: exit, peak or a time
	cost  string // collapsed
	model *analysis.Model
	proc  *analysis.Process
	log   io.Writer
}

func exportCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlags("export", "-format F -o OUT [options] trace",
		"memtrail export -format pprof -o heap.pb.gz prog.mtr && go tool pprof -top heap.pb.gz", stderr)
	format := fs.String("format", "", "what to write: "+exportFormatList())
	out := fs.String("o", "", "write to `file` (- for stdout)")
	pid := addPIDFlag(fs, "export process `pid`, or image N of a pid that exec'd with pid.N (default: the program itself, as report shows it; for parquet, every process)")
	at := fs.String("at", "exit", "pprof: count as in use the blocks live at exit, at the peak, or at a `time` after the start of the process (e.g. 1.5s, 200ms)")
	cost := fs.String("cost", "peak", "collapsed: what to weigh stacks by: allocations, allocated, peak, leaked or temporary")
	if err := parse(fs, args); err != nil {
		return 2, err
	}
	f, err := checkExport(fs, *format, *out)
	if err != nil {
		return 2, err
	}
	if f.writeDir != nil && pid.Image != 0 {
		return 2, usageError{fmt.Sprintf("-format %s writes every image of a pid: -pid takes a pid alone", f.name)}
	}
	job := &exportJob{trace: fs.Arg(0), pid: pid.ProcessID, at: *at, cost: *cost, log: stderr}
	if _, err := job.atTime(); err != nil {
		return 2, err
	}
	if _, err := analysis.ParseCost(*cost); err != nil {
		return 2, usageError{err.Error()}
	}
	if err := job.analyze(f.writeDir != nil); err != nil {
		return 1, err
	}
	if f.writeDir != nil {
		err = f.writeDir(job, *out)
	} else {
		err = writeOutput(*out, stdout, func(w io.Writer) error { return f.write(job, w) })
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

// checkExport checks the command line of memtrail export as far as it
// can without the trace, and returns the format asked for.
func checkExport(fs *flag.FlagSet, format, out string) (exportFormat, error) {
	if fs.NArg() != 1 {
		return exportFormat{}, usageError{"needs exactly one trace file"}
	}
	if format == "" {
		return exportFormat{}, usageError{"needs -format: " + exportFormatList()}
	}
	i := slices.IndexFunc(exportFormats(), func(f exportFormat) bool { return f.name == format })
	if i < 0 {
		return exportFormat{}, usageError{fmt.Sprintf("unknown format %q (formats: %s)", format, exportFormatList())}
	}
	f := exportFormats()[i]
	switch {
	case out == "" && f.writeDir != nil:
		return f, usageError{"needs -o: the directory to write the tables into"}
	case out == "":
		return f, usageError{"needs -o: the file to write (- for stdout)"}
	case out == "-" && f.writeDir != nil:
		return f, usageError{fmt.Sprintf("-format %s writes files into a directory, not to stdout", f.name)}
	}
	var misplaced []string
	fs.Visit(func(fl *flag.Flag) {
		if !slices.Contains([]string{"format", "o", "pid"}, fl.Name) && !slices.Contains(f.flags, fl.Name) {
			misplaced = append(misplaced, "-"+fl.Name)
		}
	})
	if len(misplaced) > 0 {
		return f, usageError{fmt.Sprintf("%s does not go with -format %s", strings.Join(misplaced, ", "), f.name)}
	}
	return f, nil
}

func exportFormatList() string {
	var names []string
	for _, f := range exportFormats() {
		names = append(names, f.name)
	}
	return strings.Join(names, ", ")
}

// atTime reads -at: 0 for exit and peak.
func (x *exportJob) atTime() (at time.Duration, err error) {
	switch x.at {
	case "exit", "peak":
		return 0, nil
	}
	at, err = time.ParseDuration(x.at)
	switch {
	case err != nil:
		return 0, usageError{fmt.Sprintf("-at %q is neither exit, peak nor a time such as 1.5s or 200ms", x.at)}
	case at <= 0:
		return 0, usageError{fmt.Sprintf("-at %s: the moment must come after the start of the process", x.at)}
	}
	return at, nil
}

// analyze analyzes the trace (through its cache, as report does) and
// picks the process to export, unless the format exports them all.
func (x *exportJob) analyze(all bool) error {
	m, err := analyzeCached(x.trace, analysis.Options{})
	if err != nil {
		return err
	}
	p, err := report.PickID(m, x.pid)
	if err != nil {
		return err
	}
	if len(m.Processes) > 1 && !all {
		fmt.Fprintf(x.log, "memtrail: exporting %s of the %d in the trace; choose another with -pid (memtrail report -processes lists them)\n",
			report.ProcessLabel(m, p), len(m.Processes))
	}
	x.model, x.proc = m, p
	return nil
}

// writeOutput writes what write makes to the file out, or to stdout if
// out is "-". A file that could not be written completely is removed. A
// new file is private (0600), as the trace it comes from is.
func writeOutput(out string, stdout io.Writer, write func(io.Writer) error) error {
	if out == "-" {
		w := bufio.NewWriter(stdout)
		if err := write(w); err != nil {
			return err
		}
		return w.Flush()
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
		return err
	}
	return nil
}

func writePProf(x *exportJob, w io.Writer) error {
	inUse := export.InUseAtExit()
	switch x.at {
	case "peak":
		inUse = export.InUseAtPeak()
	case "exit":
	default:
		at, _ := x.atTime()
		moment, err := x.momentAt(at)
		if err != nil {
			return err
		}
		inUse = export.InUseAt(at, moment)
	}
	return export.PProf(w, x.model.Info, x.proc, inUse)
}

// momentAt returns the process exported, analyzed at the moment at after
// its start.
func (x *exportJob) momentAt(at time.Duration) (*analysis.Process, error) {
	if uint64(at) > x.proc.RunTime() {
		return nil, fmt.Errorf("-at %s is after the end of process %d, which ran %s",
			x.at, x.proc.PID, report.Duration(x.proc.RunTime()))
	}
	m, err := analyzeCached(x.trace, analysis.Options{From: uint64(at), To: uint64(at), Stacks: x.model})
	if err != nil {
		return nil, err
	}
	for _, p := range m.Processes {
		if p.ID == x.proc.ID {
			return p, nil
		}
	}
	return nil, fmt.Errorf("process %d is not in the analysis at %v", x.proc.PID, at)
}

func writeMassif(x *exportJob, w io.Writer) error { return export.Massif(w, x.proc) }

func writeCollapsed(x *exportJob, w io.Writer) error {
	cost, err := analysis.ParseCost(x.cost)
	if err != nil {
		return err
	}
	return export.Collapsed(w, x.proc, cost)
}

// writeParquet writes the events and stacks tables into dir.
func writeParquet(x *exportJob, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tf, err := os.Open(x.trace)
	if err != nil {
		return err
	}
	defer tf.Close()
	r, err := trace.NewReader(bufio.NewReaderSize(tf, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", x.trace, err)
	}
	events, stacks := filepath.Join(dir, "events.parquet"), filepath.Join(dir, "stacks.parquet")
	err = writeOutput(events, nil, func(ew io.Writer) error {
		return writeOutput(stacks, nil, func(sw io.Writer) error {
			_, err := export.Parquet(ew, sw, r, x.model, x.pid.PID)
			return err
		})
	})
	if err != nil {
		// Neither table is of any use without the other.
		os.Remove(stacks)
	}
	return err
}
