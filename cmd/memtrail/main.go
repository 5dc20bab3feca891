// Command memtrail records the heap of C and C++ programs and reports
// where the memory went.
//
// Exit status: 0 on success; 1 when memtrail itself fails (bad input, an
// unreadable trace, a failed recording); 2 for a usage error; 3 when
// `memtrail check` (or `memtrail run -check`) finds a budget broken.
// `memtrail run` exits with the recorded program's own status (128+N if a
// signal N killed it), or 1 if the recording failed while the program
// succeeded.
//
// With MEMTRAIL_CPUPROFILE set to a file name, memtrail writes a CPU
// profile of its own work there (go tool pprof reads it): how
// cmd/memtrail/default.pgo, the profile the compiler optimizes memtrail
// with, is made (go run ./bench -pgo).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/memtrail/memtrail/internal/export"
	"github.com/memtrail/memtrail/internal/report"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	stop, err := profileCPU(os.Getenv("MEMTRAIL_CPUPROFILE"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "memtrail: MEMTRAIL_CPUPROFILE: %v\n", err)
		os.Exit(1)
	}
	code, err := run(os.Args[1:], os.Stdout, os.Stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		// An error may quote a name from a trace, which may hold
		// anything.
		fmt.Fprintf(os.Stderr, "memtrail: %s\n", report.Printable(err.Error()))
	}
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "memtrail: MEMTRAIL_CPUPROFILE: %v\n", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// profileCPU starts a CPU profile into the file path, if path is not
// empty, and returns what ends it.
func profileCPU(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// command is a subcommand: its name, a one-line summary, and what runs it.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) (int, error)
}

func commands() []command {
	return []command{
		{"run", "run a program and record its heap into a trace", runCmd},
		{"report", "report where the memory of a recorded program went", reportCmd},
		{"view", "show a trace in the browser: timeline, flame graph, leaks, tables, objects, heap map", viewCmd},
		{"check", "check a trace against memory budgets (peak, in use at exit, allocations), for CI", checkCmd},
		{"diff", "compare two traces: which call stacks grew or shrank, by peak, bytes, allocations and in use at exit", diffCmd},
		{"stack", "the worst-case stack of a binary without running it: frames, call graph, deepest chain; against a trace's measure", stackCmd},
		{"export", "write a trace in the format of another tool: " + export.FormatNames(), exportCmd},
		{"demo", "record the bundled example (the mprof widget program) and report on it", demoCmd},
		{"completion", "print a shell completion script: bash, zsh or fish", completionCmd},
		{"version", "print memtrail's version", versionCmd},
	}
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// run runs the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) (int, error) {
	progress, helpOut = stderr, stdout
	if len(args) == 0 {
		usage(stderr)
		return 2, nil
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "--help" || name == "-help" {
		if len(args) > 1 {
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		return 0, nil
	}
	if name == "--version" || name == "-version" {
		name = "version"
	}
	for _, c := range commands() {
		if c.name == name {
			code, err := c.run(args[1:], stdout, stderr)
			var ue usageError
			switch {
			case errors.Is(err, flag.ErrHelp):
				return 0, err
			case errors.As(err, &ue):
				return 2, fmt.Errorf("%s %w (see memtrail %s --help)", name, err, name)
			}
			return code, err
		}
	}
	return 2, usageError{fmt.Sprintf("unknown command %q (see memtrail help)", name)}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "memtrail records the heap of a C or C++ program and shows where the memory went.\n\n")
	fmt.Fprintf(w, "Usage:\n  memtrail <command> [options] [arguments]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nExamples:\n")
	fmt.Fprintf(w, "  memtrail run -o prog.mtr -- ./prog arg1 arg2\n")
	fmt.Fprintf(w, "  memtrail report prog.mtr\n")
	fmt.Fprintf(w, "  memtrail report --json prog.mtr\n")
	fmt.Fprintf(w, "  memtrail view prog.mtr\n")
	fmt.Fprintf(w, "\nRun memtrail <command> --help for a command's options.\n")
}

// newFlags makes the flag set of a subcommand, with a usage text that
// shows its synopsis and an example.
func newFlags(name, synopsis, example string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: memtrail %s %s\n\nOptions:\n", name, synopsis)
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nExample:\n  %s\n", example)
	}
	return fs
}

// helpOut is where --help writes: the stdout of run, for help is what
// was asked for.
var helpOut io.Writer = os.Stdout

// parse parses a subcommand's flags, given before or after its
// arguments (memtrail report prog.mtr -view leaks), turning mistakes into
// usage errors. "--" ends the options.
func parse(fs *flag.FlagSet, args []string) error {
	return parseInOrder(fs, optionsFirst(fs, args))
}

// optionsFirst moves the options of args before the other arguments,
// for Go's flag package stops at the first argument that is not an
// option. An option's value goes with it, unless the option is a boolean
// one or is written -name=value. What follows "--" stays an argument.
func optionsFirst(fs *flag.FlagSet, args []string) []string {
	var options, others []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			others = append(others, args[i+1:]...)
			break
		}
		if len(arg) < 2 || arg[0] != '-' {
			others = append(others, arg)
			continue
		}
		options = append(options, arg)
		name, _, inline := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		f := fs.Lookup(name)
		if inline || f == nil || isBoolFlag(f) {
			continue
		}
		if i+1 == len(args) {
			return options // the flag package says the value is missing
		}
		i++
		options = append(options, args[i])
	}
	return append(append(options, "--"), others...)
}

// isBoolFlag reports whether f is an option that takes no value.
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// parseInOrder parses a subcommand's flags up to its first argument, as
// memtrail run does: what follows is the program's command line.
func parseInOrder(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(helpOut)
		fs.Usage()
		return err
	}
	if err != nil {
		return usageError{err.Error()}
	}
	return nil
}

func versionCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlags("version", "", "memtrail version", stderr)
	if err := parse(fs, args); err != nil {
		return 2, err
	}
	if fs.NArg() > 0 {
		return 2, usageError{"takes no arguments"}
	}
	fmt.Fprintf(stdout, "memtrail %s\n", version)
	return 0, nil
}
