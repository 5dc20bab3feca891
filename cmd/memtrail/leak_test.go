package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/report"
)

// TestReportLeakClasses records a program that leaves blocks in every
// leak class with memtrail run, which scans at exit unless told not to:
// report's summary gives the classes valgrind --leak-check=full gives, in
// text and JSON; recorded with -leak-check=false, it says there was no
// scan and why.
func TestReportLeakClasses(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("..", "..", "internal", "record", "testdata", "leaks.c"))
	want := fixture.Valgrind(t, prog, "mix")[0].Leaks
	dir := t.TempDir()
	scanned, plain := filepath.Join(dir, "scanned.mtr"), filepath.Join(dir, "plain.mtr")
	for _, args := range [][]string{
		{"run", "-q", "-o", scanned, "--", prog, "mix"},
		{"run", "-q", "-leak-check=false", "-o", plain, "--", prog, "mix"},
	} {
		if code, err := run(args, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 || err != nil {
			t.Fatalf("%q: status %d, %v", args, code, err)
		}
	}
	s := jsonSummary(t, scanned)
	for key, v := range map[string]uint64{
		"definitely_lost_bytes": want.DefinitelyLostBytes, "definitely_lost_blocks": want.DefinitelyLostBlocks,
		"indirectly_lost_bytes": want.IndirectlyLostBytes, "indirectly_lost_blocks": want.IndirectlyLostBlocks,
		"possibly_lost_bytes": want.PossiblyLostBytes, "possibly_lost_blocks": want.PossiblyLostBlocks,
		"still_reachable_bytes": want.StillReachableBytes, "still_reachable_blocks": want.StillReachableBlocks,
	} {
		if got, ok := s[key].(float64); !ok || uint64(got) != v {
			t.Errorf("%s: %v, valgrind says %d", key, s[key], v)
		}
	}
	if s["leak_scan"] != "done" {
		t.Errorf("leak_scan: %v, want done", s["leak_scan"])
	}
	var text bytes.Buffer
	run([]string{"report", scanned}, &text, &bytes.Buffer{})
	value := exactSizeText(want.DefinitelyLostBytes) + " in " + report.Plural(want.DefinitelyLostBlocks, "block")
	if !regexp.MustCompile(`(?m)^\s+definitely lost\s+` + regexp.QuoteMeta(value) + `$`).MatchString(text.String()) {
		t.Errorf("the text report has no line of %s definitely lost:\n%s", value, text.String())
	}

	// The definitely lost blocks by stack, with what hangs from them: all
	// the lost bytes, and lost_list's list of four 40-byte nodes.
	var out bytes.Buffer
	run([]string{"report", "-json", "-top", "100", scanned}, &out, &bytes.Buffer{})
	var r struct {
		LostChains []struct {
			Leads, Bytes, Blocks uint64
			Stack                []struct{ Function string }
			Hanging              []struct{ Bytes, Blocks uint64 }
		} `json:"lost_chains"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	var lost, listBytes, listBlocks uint64
	for _, c := range r.LostChains {
		lost += c.Bytes
		if len(c.Stack) > 1 && c.Stack[1].Function == "lost_list" {
			listBytes, listBlocks = c.Bytes, c.Blocks
		}
	}
	if want := want.DefinitelyLostBytes + want.IndirectlyLostBytes; lost != want {
		t.Errorf("the lost chains hold %d bytes, valgrind counts %d definitely and indirectly lost", lost, want)
	}
	if listBytes != 160 || listBlocks != 4 {
		t.Errorf("lost_list's chain: %d bytes in %d blocks, want the 4 nodes of 40 bytes", listBytes, listBlocks)
	}
	if !strings.Contains(text.String(), "Definitely lost, with what hangs from it") {
		t.Errorf("the text report has no lost chains:\n%s", text.String())
	}

	// Budgets per class: the definitely lost bytes break a budget of 0,
	// and the suppressions valgrind writes for those blocks, each with its
	// kind (match-leak-kinds), take them out.
	var verdict bytes.Buffer
	code, err := run([]string{"check", "-max-definitely-lost", "0", "-max-possibly-lost", "0", scanned}, &verdict, &bytes.Buffer{})
	for _, line := range []string{"FAIL definitely lost +" + report.Size(want.DefinitelyLostBytes) + " > 0 bytes",
		"FAIL possibly lost +" + report.Size(want.PossiblyLostBytes) + " > 0 bytes"} {
		if code != 3 || err != nil || !regexp.MustCompile(line).MatchString(verdict.String()) {
			t.Errorf("check -max-definitely-lost 0 -max-possibly-lost 0: status %d (%v), no %q in\n%s", code, err, line, verdict.String())
		}
	}
	vg := exec.Command("valgrind", "--leak-check=full", "--show-leak-kinds=all", "--gen-suppressions=all", "--run-libc-freeres=no", prog, "mix")
	var vgOut bytes.Buffer
	vg.Stderr = &vgOut
	if err := vg.Run(); err != nil {
		t.Fatalf("valgrind: %v\n%s", err, vgOut.String())
	}
	supp := filepath.Join(dir, "valgrind.supp")
	os.WriteFile(supp, []byte(strings.Join(regexp.MustCompile(`(?ms)^\{\n.*?^\}\n`).FindAllString(vgOut.String(), -1), "")), 0o644)
	verdict.Reset()
	code, err = run([]string{"check", "-max-definitely-lost", "0", "-max-indirectly-lost", "0", "-max-possibly-lost", "0", "-suppressions", supp, scanned}, &verdict, &bytes.Buffer{})
	if code != 0 || err != nil {
		t.Errorf("check per class with valgrind's suppressions: status %d (%v)\n%s", code, err, verdict.String())
	}
	checkBadInput(t, []string{"check", "-max-definitely-lost", "0", plain}, 1, "has no leak classes: not scanned")

	s = jsonSummary(t, plain)
	if s["definitely_lost_bytes"] != nil || s["leak_scan"] != "not scanned (recorded with -leak-check=false)" {
		t.Errorf("with -leak-check=false: definitely_lost_bytes %v, leak_scan %v", s["definitely_lost_bytes"], s["leak_scan"])
	}
}

// exactSizeText writes n bytes as the report's summary does.
func exactSizeText(n uint64) string {
	if n < 1024 {
		return report.Size(n)
	}
	return report.Size(n) + " (" + report.Count(n) + " bytes)"
}

// TestLeakOrigins records leaks.c freeing a list's head while it still
// points to the rest, with -leak-origins: the lost chain names the free
// of the head (the function and line of the free call) as where the
// leak was made, with all the chain's bytes. A list whose head pointer
// is overwritten was made unreachable by no free, and the report says
// so; without -leak-origins the report does not look.
func TestLeakOrigins(t *testing.T) {
	source := filepath.Join("..", "..", "internal", "record", "testdata", "leaks.c")
	prog := fixture.Build(t, source)
	src, err := os.ReadFile(source)
	if err != nil {
		t.Fatal(err)
	}
	freeLine, arrayLine := uint64(0), uint64(0)
	for i, line := range strings.Split(string(src), "\n") {
		if strings.Contains(line, "the leak is made here") {
			freeLine = uint64(i + 1)
		}
		if strings.Contains(line, "the array's leak is made here") {
			arrayLine = uint64(i + 1)
		}
	}
	type part struct {
		Bytes, Blocks uint64
		Stack         []struct {
			Function string
			Line     uint64
		}
	}
	chains := func(how string, flags ...string) ([]struct {
		Bytes, Blocks uint64
		Origins       []part
	}, string) {
		t.Helper()
		trace := filepath.Join(t.TempDir(), how+".mtr")
		args := append(append([]string{"run", "-q"}, flags...), "-o", trace, "--", prog, how)
		if code, err := run(args, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 || err != nil {
			t.Fatalf("%q: status %d, %v", args, code, err)
		}
		var out, text bytes.Buffer
		run([]string{"report", "-json", trace}, &out, &bytes.Buffer{})
		run([]string{"report", trace}, &text, &bytes.Buffer{})
		var r struct {
			LostChains []struct {
				Bytes, Blocks uint64
				Origins       []part
			} `json:"lost_chains"`
		}
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		return r.LostChains, text.String()
	}

	got, text := chains("freed_head", "-leak-origins")
	if len(got) != 1 || got[0].Bytes != 120 || got[0].Blocks != 3 {
		t.Fatalf("freed_head: lost chains %+v, want one of 120 bytes in 3 blocks (as valgrind counts)", got)
	}
	o := got[0].Origins
	if len(o) != 1 || o[0].Bytes != 120 || o[0].Blocks != 3 || len(o[0].Stack) == 0 ||
		o[0].Stack[0].Function != "freed_head" || o[0].Stack[0].Line != freeLine {
		t.Errorf("freed_head's chain was made unreachable by %+v; want the free at freed_head, leaks.c:%d, 120 bytes in 3 blocks", o, freeLine)
	}
	if !strings.Contains(text, "made unreachable by a free of the block that pointed to it: 120 bytes in 3 blocks, freed from") {
		t.Errorf("the text report does not say which free made the leak:\n%s", text)
	}

	// 300 pointers: more than one record of the agent holds.
	got, _ = chains("freed_array", "-leak-origins")
	if len(got) != 1 || len(got[0].Origins) != 1 || got[0].Origins[0].Bytes != 7200 || got[0].Origins[0].Blocks != 300 ||
		got[0].Origins[0].Stack[0].Line != arrayLine {
		t.Errorf("freed_array: lost chains %+v; want all 300 blocks made unreachable by the free at leaks.c:%d", got, arrayLine)
	}

	got, text = chains("list", "-leak-origins")
	if len(got) != 1 || got[0].Origins == nil || len(got[0].Origins) != 0 {
		t.Errorf("list, overwritten head: lost chains %+v, want one made unreachable by no free", got)
	}
	if !strings.Contains(text, "160 bytes in 4 blocks lost their last pointer other than by a free") {
		t.Errorf("the text report does not say that no free made list's leak:\n%s", text)
	}

	got, text = chains("freed_head")
	if len(got) != 1 || got[0].Origins != nil || strings.Contains(text, "made unreachable") {
		t.Errorf("without -leak-origins: lost chains %+v, and the report says where leaks were made:\n%s", got, text)
	}
	checkBadInput(t, []string{"run", "-leak-origins", "-leak-check=false", "--", prog}, 2, "-leak-origins needs the leak scan")
}

// TestReportFilterLeakClasses records leaks.c, whose blocks of each leak
// class come from their own functions, and filters its report: the leak
// classes of the summary count the blocks the filter keeps, as its other
// rows do (a filter that keeps every block gives the classes of the whole
// process); a filter that keeps or leaves out nothing says so on stderr.
func TestReportFilterLeakClasses(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("..", "..", "internal", "record", "testdata", "leaks.c"))
	trace := filepath.Join(t.TempDir(), "leaks.mtr")
	if code, err := run([]string{"run", "-q", "-o", trace, "--", prog, "mix"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 || err != nil {
		t.Fatalf("run: status %d, %v", code, err)
	}
	classes := []string{"definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"}
	summary := func(filter ...string) (map[string]uint64, string) {
		t.Helper()
		var out, stderr bytes.Buffer
		args := append(append([]string{"report", "-json"}, filter...), trace)
		if code, err := run(args, &out, &stderr); code != 0 || err != nil {
			t.Fatalf("%q: status %d, %v", args, code, err)
		}
		var r struct{ Summary map[string]any }
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		got := make(map[string]uint64)
		for _, c := range classes {
			for _, unit := range []string{"_bytes", "_blocks"} {
				v, ok := r.Summary[c+unit].(float64)
				if !ok {
					t.Fatalf("%q: no %s in the summary", args, c+unit)
				}
				got[c+unit] = uint64(v)
			}
		}
		return got, stderr.String()
	}
	whole, warnings := summary()
	if warnings != "" {
		t.Errorf("report without filters warns:\n%s", warnings)
	}
	all, _ := summary("-function", ".")
	if !maps.Equal(all, whole) {
		t.Errorf("-function . keeps every block, but its classes are %v; the process's are %v", all, whole)
	}
	for _, c := range []struct {
		function string
		want     map[string]uint64
	}{
		// The head of a list of four 40-byte nodes is definitely lost,
		// the rest hang from it.
		{"^lost_list$", map[string]uint64{"definitely_lost_bytes": 40, "definitely_lost_blocks": 1, "indirectly_lost_bytes": 120, "indirectly_lost_blocks": 3}},
		// A block of 64 bytes a global points to, and one of 72 it
		// points to.
		{"^global$", map[string]uint64{"still_reachable_bytes": 136, "still_reachable_blocks": 2}},
		{"^parse_", map[string]uint64{}},
	} {
		got, _ := summary("-function", c.function)
		for _, cl := range classes {
			for _, unit := range []string{"_bytes", "_blocks"} {
				if got[cl+unit] != c.want[cl+unit] {
					t.Errorf("-function %s: %s %d, want %d", c.function, cl+unit, got[cl+unit], c.want[cl+unit])
				}
			}
		}
	}
	var text bytes.Buffer
	run([]string{"report", "-function", "^parse_", trace}, &text, &bytes.Buffer{})
	if !regexp.MustCompile(`(?m)^\s+definitely lost\s+0 bytes in 0 blocks$`).MatchString(text.String()) {
		t.Errorf("report -function ^parse_ shows leaks of blocks it does not keep:\n%s", text.String())
	}
	for _, c := range []struct {
		filter []string
		want   string
	}{
		{[]string{"-function", "^parse_"}, "memtrail: warning: -function ^parse_ matches no function in the call stacks of the allocations: it keeps nothing\n"},
		{[]string{"-file", "nowhere.c", "-function", "main"}, "memtrail: warning: -file nowhere.c matches no source file in the call stacks of the allocations: it keeps nothing\n"},
		{[]string{"-module", "libnowhere"}, "memtrail: warning: -module libnowhere matches no object file in the call stacks of the allocations: it keeps nothing\n"},
		{[]string{"-ignore", "^parse_"}, "memtrail: warning: -ignore ^parse_ matches no function in the call stacks of the allocations: it leaves nothing out\n"},
		{[]string{"-thread", "5"}, "memtrail: warning: -thread 5: process "},
		// Each matches, but every stack through lost_list goes
		// through list too.
		{[]string{"-function", "^lost_list$", "-ignore", "^list$"}, "memtrail: warning: the filters together keep none of the blocks of process "},
	} {
		_, warnings := summary(c.filter...)
		if !strings.HasPrefix(warnings, c.want) || strings.Count(warnings, "\n") != 1 {
			t.Errorf("%q: warnings\n%s\nwant one line starting with %q", c.filter, warnings, c.want)
		}
	}
}
