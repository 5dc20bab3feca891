package main

import (
	"flag"

	"github.com/memtrail/memtrail/internal/report"
)

// pidFlag is -pid: a process of the trace as report.ProcessID reads it,
// 1234 or 1234.2 (the second image of pid 1234, after its first exec).
type pidFlag struct{ report.ProcessID }

func (f *pidFlag) String() string {
	if f.PID == 0 {
		return ""
	}
	return f.ProcessID.String()
}

func (f *pidFlag) Set(s string) error {
	id, err := report.ParseProcessID(s)
	if err != nil {
		return err
	}
	f.ProcessID = id
	return nil
}

// addPIDFlag adds the option name (-pid, diff's -old-pid and -new-pid)
// to fs, with usage.
func addPIDFlag(fs *flag.FlagSet, name, usage string) *pidFlag {
	f := &pidFlag{}
	fs.Var(f, name, usage)
	return f
}
