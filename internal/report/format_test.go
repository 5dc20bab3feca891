package report

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestPlural writes counts with their nouns, as the reports and memtrail
// run -stats do.
func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		noun string
		want string
	}{
		{0, "block", "0 blocks"},
		{1, "block", "1 block"},
		{8644711, "event", "8,644,711 events"},
		{1, "process", "1 process"},
		{3, "process", "3 processes"},
	} {
		if got := Plural(c.n, c.noun); got != c.want {
			t.Errorf("Plural(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}

// TestPrintable escapes what a terminal would take as a command, and
// leaves the rest of a name as it is.
func TestPrintable(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"main", "main"},
		{"std::vector<int>::push_back", "std::vector<int>::push_back"},
		{"évier.c", "évier.c"},
		{"evil\x1b]0;pwned\x07\x1b[31m.c", `evil\x1b]0;pwned\x07\x1b[31m.c`},
		{"two\nlines\ttab\x7f", `two\x0alines\x09tab\x7f`},
		{"c1\u009b31m", `c1\u009b31m`},
		{"bad\x9b31m\xff", `bad\x9b31m\xff`},
	} {
		if got := Printable(c.name); got != c.want {
			t.Errorf("Printable(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestShellQuote quotes arguments as a command line and has a real bash
// read them back: the same arguments, control characters and all.
func TestShellQuote(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash reads the quoted command line: %v", err)
	}
	args := []string{"plain", "two words", "it's", `back\slash`, "\x1b[2J", "it's\x07 \\x1b", "c1\u009b", ""}
	line := CommandLine(args)
	if strings.ContainsFunc(line, func(r rune) bool { return r < 0x20 || r >= 0x7f && r <= 0x9f }) {
		t.Errorf("CommandLine(%q) = %q holds control characters", args, line)
	}
	out, err := exec.Command(bash, "-c", `printf '%s\0' `+line).Output()
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	if got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00"); !slices.Equal(got, args) {
		t.Errorf("bash reads %s as %q, want %q", line, got, args)
	}
}
