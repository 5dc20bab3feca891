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
)

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
	format := fs.String("format", "", "what to write: "+export.FormatNames())
	out := fs.String("o", "", "write to `file` (- for stdout)")
	pid := addPIDFlag(fs, "pid", "export process `pid`, or image N of a pid that exec'd with pid.N (default: the program itself, as report shows it; for parquet, every process)")
	at := fs.String("at", "exit", "pprof: count as in use the blocks live at exit, at the peak, or at a `time` after the start of the process (e.g. 1.5s, 200ms)")
	cost := fs.String("cost", "peak", "collapsed: what to weigh stacks by: allocations, allocated, peak, leaked or temporary")
	if err := parse(fs, args); err != nil {
		return 2, err
	}
	f, err := checkExport(fs, *format, *out)
	if err != nil {
		return 2, err
	}
	if f.Tables != nil && pid.Image != 0 {
		return 2, usageError{fmt.Sprintf("-format %s writes every image of a pid: -pid takes a pid alone", f.Name)}
	}
	job := &exportJob{trace: fs.Arg(0), pid: pid.ProcessID, at: *at, cost: *cost, log: stderr}
	if _, err := job.atTime(); err != nil {
		return 2, err
	}
	if _, err := analysis.ParseCost(*cost); err != nil {
		return 2, usageError{err.Error()}
	}
	if err := job.analyze(f.Tables != nil); err != nil {
		return 1, err
	}
	if f.Tables != nil {
		err = writeTables(f, job, *out)
	} else {
		err = writeOutput(*out, stdout, func(w io.Writer) error {
			j, err := job.export()
			if err != nil {
				return err
			}
			return f.Write(w, j)
		})
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

// checkExport checks the command line of memtrail export as far as it
// can without the trace, and returns the format asked for.
func checkExport(fs *flag.FlagSet, format, out string) (export.Format, error) {
	if fs.NArg() != 1 {
		return export.Format{}, usageError{"needs exactly one trace file"}
	}
	if format == "" {
		return export.Format{}, usageError{"needs -format: " + export.FormatNames()}
	}
	f, err := export.FormatNamed(format)
	if err != nil {
		return f, usageError{err.Error()}
	}
	switch {
	case out == "" && f.Tables != nil:
		return f, usageError{"needs -o: the directory to write the tables into"}
	case out == "":
		return f, usageError{"needs -o: the file to write (- for stdout)"}
	case out == "-" && f.Tables != nil:
		return f, usageError{fmt.Sprintf("-format %s writes files into a directory, not to stdout", f.Name)}
	}
	var misplaced []string
	fs.Visit(func(fl *flag.Flag) {
		if !slices.Contains([]string{"format", "o", "pid"}, fl.Name) && !slices.Contains(f.Options, fl.Name) {
			misplaced = append(misplaced, "-"+fl.Name)
		}
	})
	if len(misplaced) > 0 {
		return f, usageError{fmt.Sprintf("%s does not go with -format %s", strings.Join(misplaced, ", "), f.Name)}
	}
	return f, nil
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

// export returns the job for package export: pprof's moment as -at
// says, collapsed's cost.
func (x *exportJob) export() (export.Job, error) {
	j := export.Job{Trace: x.trace, Model: x.model, Process: x.proc, PID: x.pid.PID}
	var err error
	if j.Cost, err = analysis.ParseCost(x.cost); err != nil {
		return j, err
	}
	switch x.at {
	case "peak":
		j.InUse = export.InUseAtPeak()
	case "exit":
		j.InUse = export.InUseAtExit()
	default:
		at, _ := x.atTime()
		moment, err := x.momentAt(at)
		if err != nil {
			return j, err
		}
		j.InUse = export.InUseAt(at, moment)
	}
	return j, nil
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

// writeTables writes the tables of format f into the directory dir. A
// table that could not be written is removed, and the others with it:
// none is of any use without the others.
func writeTables(f export.Format, x *exportJob, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, err := x.export()
	if err != nil {
		return err
	}
	tables := make([]io.Writer, len(f.Tables))
	var open func(i int) error
	open = func(i int) error {
		if i == len(f.Tables) {
			return f.WriteTables(tables, j)
		}
		return writeOutput(filepath.Join(dir, f.Tables[i]), nil, func(w io.Writer) error {
			tables[i] = w
			return open(i + 1)
		})
	}
	err = open(0)
	if err != nil {
		for _, t := range f.Tables {
			os.Remove(filepath.Join(dir, t))
		}
	}
	return err
}
