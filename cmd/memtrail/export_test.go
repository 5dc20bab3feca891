package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/export"
)

// TestExportBadInput runs export on mistakes of every kind: each must end
// with the status main.go documents and one line saying what is wrong,
// and leave no output file behind.
func TestExportBadInput(t *testing.T) {
	dir := t.TempDir()
	small := writeTrace(t, dir, "small.mtr", smallTrace)
	notTrace := filepath.Join(dir, "notes.txt")
	os.WriteFile(notTrace, []byte("hello, this is not a trace\n"), 0o644)
	out := filepath.Join(dir, "out")
	for _, c := range []struct {
		args []string
		code int
		want string // in the error
	}{
		{[]string{"export", "-o", out, small}, 2, "needs -format: pprof, collapsed, massif, parquet"},
		{[]string{"export", "-format", "svg", "-o", out, small}, 2, `unknown format "svg"`},
		{[]string{"export", "-format", "pprof", small}, 2, "needs -o"},
		{[]string{"export", "-format", "parquet", small}, 2, "needs -o: the directory"},
		{[]string{"export", "-format", "parquet", "-o", "-", small}, 2, "writes files into a directory, not to stdout"},
		{[]string{"export", "-format", "pprof", "-o", out}, 2, "needs exactly one trace file"},
		{[]string{"export", "-format", "pprof", "-o", out, "-at", "soon", small}, 2, `-at "soon" is neither exit, peak nor a time`},
		{[]string{"export", "-format", "pprof", "-o", out, "-at", "-1s", small}, 2, "must come after the start"},
		{[]string{"export", "-format", "pprof", "-o", out, "-at", "1h", small}, 1, "-at 1h is after the end of process 100, which ran 10.0 ms"},
		{[]string{"export", "-format", "massif", "-o", out, "-at", "peak", small}, 2, "-at does not go with -format massif"},
		{[]string{"export", "-format", "pprof", "-o", out, "-cost", "peak", small}, 2, "-cost does not go with -format pprof"},
		{[]string{"export", "-format", "collapsed", "-o", out, "-cost", "money", small}, 2, `unknown cost "money"`},
		{[]string{"export", "-format", "pprof", "-o", out, "-pid", "7", small}, 1, "process 7 is not in this trace"},
		{[]string{"export", "-format", "pprof", "-o", out, filepath.Join(dir, "missing.mtr")}, 1, "no such file"},
		{[]string{"export", "-format", "massif", "-o", out, notTrace}, 1, "not a memtrail trace"},
		{[]string{"export", "-format", "pprof", "-o", filepath.Join(dir, "no", "such", "dir", "x.pb.gz"), small}, 1, "no such file or directory"},
	} {
		t.Run(strings.Join(c.args[1:], " "), func(t *testing.T) {
			checkBadInput(t, c.args, c.code, c.want)
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was written", out)
			}
		})
	}
}

// TestExportFormats exports a small trace in every format, to a file and
// (but Parquet) to stdout.
func TestExportFormats(t *testing.T) {
	dir := t.TempDir()
	small := writeTrace(t, dir, "small.mtr", smallTrace)
	for _, f := range export.Formats {
		t.Run(f.Name, func(t *testing.T) {
			out := filepath.Join(dir, f.Name+".out")
			var stdout, stderr bytes.Buffer
			if code, err := run([]string{"export", "-format", f.Name, "-o", out, small}, &stdout, &stderr); code != 0 || err != nil {
				t.Fatalf("status %d, %v", code, err)
			}
			if f.Tables != nil {
				for _, table := range []string{"events.parquet", "stacks.parquet"} {
					if data, err := os.ReadFile(filepath.Join(out, table)); err != nil || !bytes.HasPrefix(data, []byte("PAR1")) {
						t.Errorf("%s: %v, %.4q", table, err, data)
					}
				}
				return
			}
			file, err := os.ReadFile(out)
			if err != nil || len(file) == 0 {
				t.Fatalf("%s: %v, %d bytes", out, err, len(file))
			}
			if code, err := run([]string{"export", "-format", f.Name, "-o", "-", small}, &stdout, &stderr); code != 0 || err != nil {
				t.Fatalf("to stdout: status %d, %v", code, err)
			}
			if !bytes.Equal(stdout.Bytes(), file) {
				t.Errorf("stdout differs from the file:\n%s\n%s", stdout.Bytes(), file)
			}
		})
	}
}

// TestExportHelp checks that export --help shows the options and an
// example, and ends well.
func TestExportHelp(t *testing.T) {
	var help, stderr bytes.Buffer
	code, err := run([]string{"export", "--help"}, &help, &stderr)
	if code != 0 || !errors.Is(err, flag.ErrHelp) {
		t.Errorf("status %d, %v", code, err)
	}
	for _, want := range []string{"Usage: memtrail export -format F -o OUT", "-format", "-cost", "-at", "Example:\n  memtrail export -format pprof"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("export --help does not show %q:\n%s", want, help.String())
		}
	}
}
