package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
)

// TestOptionsAfterArguments gives every command that reads files its
// options after the files too, as users write them: the outcome is the
// same as with the options first. "--" still ends the options.
func TestOptionsAfterArguments(t *testing.T) {
	dir := t.TempDir()
	small := writeTrace(t, dir, "small.mtr", smallTrace)
	prog := fixture.Build(t, filepath.Join("..", "..", "internal", "stackdepth", "testdata", "chain.c"))
	for _, c := range []struct {
		before, after []string
		code          int
	}{
		{[]string{"report", "-view", "leaks", small}, []string{"report", small, "-view", "leaks"}, 0},
		{[]string{"report", "-json", "-view", "bins", small}, []string{"report", small, "-json", "-view=bins"}, 0},
		{[]string{"check", "-max-peak", "47B", small}, []string{"check", small, "-max-peak", "47B"}, 3},
		{[]string{"export", "-format", "collapsed", "-o", "-", small}, []string{"export", small, "-format", "collapsed", "-o", "-"}, 0},
		{[]string{"diff", "-json", small, small}, []string{"diff", small, "-json", small}, 0},
		{[]string{"stack", "-entry", "a", prog}, []string{"stack", prog, "-entry", "a"}, 0},
	} {
		var want, got, stderr bytes.Buffer
		if code, err := run(c.before, &want, &stderr); code != c.code {
			t.Fatalf("%q: status %d (%v), want %d", c.before, code, err, c.code)
		}
		if code, err := run(c.after, &got, &stderr); code != c.code {
			t.Errorf("%q: status %d (%v), want %d", c.after, code, err, c.code)
		}
		if want.Len() == 0 || !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("%q wrote\n%s\nbut %q wrote\n%s", c.after, got.String(), c.before, want.String())
		}
	}
	// view serves until stopped: the error on the trace to compare shows
	// that -compare was read after the trace.
	checkBadInput(t, []string{"view", small, "-compare", filepath.Join(dir, "old.mtr")}, 1, "old.mtr: no such file")
	// After "--", what looks like an option is a file name.
	checkBadInput(t, []string{"report", small, "--", "-view"}, 2, "needs exactly one trace file")
	checkBadInput(t, []string{"report", "--", "-view"}, 1, "-view: no such file")
	checkBadInput(t, []string{"report", small, "-top"}, 2, "flag needs an argument: -top")
}

// TestVersionOption asks for the version as most programs take it: the
// options --version and -version say what memtrail version does.
func TestVersionOption(t *testing.T) {
	var want bytes.Buffer
	if code, err := run([]string{"version"}, &want, &bytes.Buffer{}); code != 0 || err != nil {
		t.Fatalf("version: status %d, %v", code, err)
	}
	if want.String() != "memtrail "+version+"\n" {
		t.Errorf("version wrote %q", want.String())
	}
	for _, option := range []string{"--version", "-version"} {
		var got bytes.Buffer
		if code, err := run([]string{option}, &got, &bytes.Buffer{}); code != 0 || err != nil || got.String() != want.String() {
			t.Errorf("%s: status %d, %v, wrote %q; want %q", option, code, err, got.String(), want.String())
		}
	}
}
