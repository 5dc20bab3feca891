package main

import (
	"io"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/report"
)

func diffCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlags("diff", "[options] old-trace new-trace", "memtrail diff before.mtr after.mtr", stderr)
	asJSON := fs.Bool("json", false, "write the comparison as JSON")
	oldPID := addPIDFlag(fs, "old-pid", "compare process `pid` (or pid.N, image N of a pid that exec'd) of the old trace (default: its program itself)")
	newPID := addPIDFlag(fs, "new-pid", "compare process `pid` (or pid.N) of the new trace (default: its program itself)")
	top := fs.Int("top", 5, "show the `n` call stacks that grew most and the n that shrank most, by each cost")
	frames := fs.Int("frames", 8, "show at most `n` frames of each call stack (text only)")
	if err := parse(fs, args); err != nil {
		return 2, err
	}
	if fs.NArg() != 2 {
		return 2, usageError{"needs two trace files: the old run's and the new run's"}
	}
	var procs [2]*analysis.Process
	var ids [2]report.ProcessID
	for i, pid := range []report.ProcessID{oldPID.ProcessID, newPID.ProcessID} {
		m, err := analyzeCached(fs.Arg(i), analysis.Options{})
		if err != nil {
			return 1, err
		}
		if procs[i], err = report.PickID(m, pid); err != nil {
			return 1, err
		}
		ids[i] = report.IDOf(m, procs[i])
	}
	changes := analysis.Compare(procs[0], procs[1])
	var err error
	if *asJSON {
		err = report.DiffJSON(stdout, procs[0], procs[1], changes)
	} else {
		err = report.DiffText(stdout, procs[0], procs[1], ids[0], ids[1], changes, report.Options{Top: *top, Frames: *frames, Color: colored(stdout)})
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}
