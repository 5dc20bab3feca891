package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/report"
)

// TestCheck holds the small trace (48 bytes at the peak, 32 in use at
// exit, 2 allocations, all from main) to budgets that hold and that break.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	small := writeTrace(t, dir, "small.mtr", smallTrace)
	supp := filepath.Join(dir, "main.supp")
	os.WriteFile(supp, []byte("# main's blocks are meant to stay\nleak:^main$\n"), 0o644)
	bad := filepath.Join(dir, "bad.supp")
	os.WriteFile(bad, []byte("leak:a\nrace:b\n"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want []string // in the output, or in the error
	}{
		{[]string{"-max-peak", "48", small}, 0, []string{"the budget held", "ok   peak heap       48 bytes <= 48 bytes"}},
		{[]string{"-max-peak", "47B", small}, 3, []string{"1 of 1 budget broken", "FAIL peak heap       48 bytes > 47 bytes (-max-peak)", "#1 48 bytes in 2 blocks", "main"}},
		{[]string{"-max-in-use-at-exit", "0", "-max-allocations", "2", small}, 3, []string{
			"1 of 2 budgets broken", "FAIL in use at exit  32 bytes > 0 bytes", "#1 32 bytes in 1 block", "ok   allocations     2 <= 2"}},
		{[]string{"-max-allocations", "1", small}, 3, []string{"FAIL allocations     2 > 1", "#1 2 allocations, 48 bytes"}},
		{[]string{"-max-in-use-at-exit", "0", "-suppressions", supp, small}, 0, []string{
			"ok   in use at exit  0 bytes <= 0 bytes", "suppressed: 32 bytes in 1 block", "leak:^main$  (" + supp + ":2)"}},
		{[]string{small}, 2, []string{"needs at least one budget"}},
		{[]string{"-max-peak", "lots", small}, 2, []string{`"lots" is not a size`}},
		{[]string{"-max-peak", "1", filepath.Join(dir, "none.mtr")}, 1, []string{"no such file"}},
		{[]string{"-max-peak", "1", "-suppressions", bad, small}, 1, []string{bad + `:2: "race:b" is neither`}},
		{[]string{"-max-peak", "1", "-pid", "7", small}, 1, []string{"7"}},
	} {
		var stdout, stderr bytes.Buffer
		code, err := run(append([]string{"check"}, c.args...), &stdout, &stderr)
		out := stdout.String()
		if err != nil {
			out += "error: " + err.Error()
		}
		if code != c.code {
			t.Errorf("check %q: status %d, want %d\n%s", c.args, code, c.code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("check %q: no %q in\n%s", c.args, w, out)
			}
		}
	}

	var stdout bytes.Buffer
	if code, err := run([]string{"check", "-json", "-max-in-use-at-exit", "0", small}, &stdout, os.Stderr); code != 3 || err != nil {
		t.Fatalf("check -json: status %d, %v", code, err)
	}
	var verdict struct {
		Broken    bool
		Processes []struct {
			PID     uint64
			Budgets []struct {
				Budget        string
				Limit, Actual uint64
				Broken        bool
				Sites         []struct{ Stack []struct{ Function string } }
			}
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &verdict); err != nil {
		t.Fatalf("check -json: %v\n%s", err, stdout.String())
	}
	if len(verdict.Processes) != 1 || len(verdict.Processes[0].Budgets) != 1 {
		t.Fatalf("check -json: %s", stdout.String())
	}
	b := verdict.Processes[0].Budgets[0]
	if !verdict.Broken || b.Budget != "max-in-use-at-exit" || b.Actual != 32 || !b.Broken ||
		len(b.Sites) != 1 || b.Sites[0].Stack[0].Function != "main" {
		t.Errorf("check -json: %+v", verdict)
	}
}

// TestCheckDamaged holds traces that lost part of what the program did to
// a budget the rest holds to: a real trace cut in half, the same with a
// bit flipped in its middle, and a trace whose process lost events. Each
// fails with status 1 and says why, unless -allow-damaged, which judges
// what was read and says so on stderr.
func TestCheckDamaged(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("testdata", "churn.c"))
	dir := t.TempDir()
	trace := filepath.Join(dir, "churn.mtr")
	if _, stderr, code := runMemtrail(t, "run", "-q", "-o", trace, "--", prog, "1000000"); code != 0 {
		t.Fatalf("run: status %d\n%s", code, stderr)
	}
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	half := filepath.Join(dir, "half.mtr")
	os.WriteFile(half, data[:len(data)/2], 0o644)
	flipped := filepath.Join(dir, "flipped.mtr")
	data[len(data)/2] ^= 0x10
	os.WriteFile(flipped, data, 0o644)
	lost := writeTrace(t, dir, "lost.mtr", strings.Replace(smallTrace, "process-end",
		`lost process=1 count=3 reason="events the agent could not record"`+"\nprocess-end", 1))
	for _, c := range []struct {
		trace, why string
	}{
		{half, "parts of it could not be read; it has no end record, for it was cut short"},
		{flipped, "parts of it could not be read"},
		{lost, "process 100 lost 3 of its events"},
	} {
		checkBadInput(t, []string{"check", "-max-peak", "1GiB", c.trace}, 1, c.trace+" cannot be judged: "+c.why)
		checkBadInput(t, []string{"check", c.trace, "-max-peak", "1GiB", "-json"}, 1, c.trace+" cannot be judged: "+c.why)
		var stdout, stderr bytes.Buffer
		code, err := run([]string{"check", "-allow-damaged", "-max-peak", "1GiB", c.trace}, &stdout, &stderr)
		if code != 0 || err != nil {
			t.Errorf("check -allow-damaged %s: status %d, %v", c.trace, code, err)
		}
		if want := "judging what was read of " + c.trace + ": " + c.why; !strings.Contains(stderr.String(), want) {
			t.Errorf("check -allow-damaged %s: no %q on stderr:\n%s", c.trace, want, stderr.String())
		}
		if want := "the budget held"; !strings.Contains(stdout.String(), want) {
			t.Errorf("check -allow-damaged %s: no %q in\n%s", c.trace, want, stdout.String())
		}
	}
	checkBadInput(t, []string{"run", "-allow-damaged", "--", prog}, 2, "-allow-damaged goes with -check")
}

// TestCheckExactBytes breaks a budget by one byte, where the two sizes
// rounded read the same: the verdict shows them exactly.
func TestCheckExactBytes(t *testing.T) {
	// 16 + 1,090,490 bytes at the peak: 1.04 MiB.
	big := writeTrace(t, t.TempDir(), "big.mtr", strings.Replace(smallTrace, "size=32", "size=1090490", 1))
	var stdout bytes.Buffer
	code, err := run([]string{"check", "-max-peak", "1090505", big}, &stdout, os.Stderr)
	if code != budgetBroken || err != nil {
		t.Fatalf("check: status %d, %v", code, err)
	}
	if want := "FAIL peak heap       1.04 MiB (1,090,506 bytes) > 1.04 MiB (1,090,505 bytes) (-max-peak)"; !strings.Contains(stdout.String(), want) {
		t.Errorf("check: no %q in\n%s", want, stdout.String())
	}
	stdout.Reset()
	if code, err := run([]string{"check", "-max-peak", "2MiB", big}, &stdout, os.Stderr); code != 0 || err != nil {
		t.Fatalf("check: status %d, %v", code, err)
	}
	if want := "ok   peak heap       1.04 MiB <= 2.00 MiB (-max-peak)"; !strings.Contains(stdout.String(), want) {
		t.Errorf("check: no %q in\n%s", want, stdout.String())
	}
}

// TestRunCheckValgrindSuppressions records a program that leaves blocks
// allocated at exit with memtrail run -check: the in-use-at-exit budget
// breaks by what valgrind counts in use at exit, and the suppressions
// valgrind itself writes for those blocks (--gen-suppressions) make it
// hold.
func TestRunCheckValgrindSuppressions(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("testdata", "leaks.c"))
	want := fixture.Valgrind(t, prog)[0]
	vg := exec.Command("valgrind", "--leak-check=full", "--show-leak-kinds=all", "--gen-suppressions=all",
		"--run-libc-freeres=no", prog)
	var vgOut bytes.Buffer
	vg.Stderr = &vgOut
	if err := vg.Run(); err != nil {
		t.Fatalf("valgrind: %v\n%s", err, vgOut.String())
	}
	blocks := regexp.MustCompile(`(?ms)^\{\n.*?^\}\n`).FindAllString(vgOut.String(), -1)
	if len(blocks) != 2 {
		t.Fatalf("valgrind wrote %d suppressions, want 2:\n%s", len(blocks), vgOut.String())
	}
	dir := t.TempDir()
	supp := filepath.Join(dir, "valgrind.supp")
	os.WriteFile(supp, []byte(strings.Join(blocks, "")), 0o644)

	var stdout, stderr bytes.Buffer
	trace := filepath.Join(dir, "leaks.mtr")
	code, err := run([]string{"run", "-q", "-o", trace, "-check", "-max-in-use-at-exit", "0", "--", prog}, &stdout, &stderr)
	if code != 3 || err != nil {
		t.Fatalf("run -check: status %d (%v), want 3\n%s%s", code, err, stdout.String(), stderr.String())
	}
	if line := "FAIL in use at exit  " + report.Size(want.InUseBytes) + " > 0 bytes"; !strings.Contains(stderr.String(), line) {
		t.Errorf("run -check: no %q (valgrind: %d bytes in use at exit) in\n%s", line, want.InUseBytes, stderr.String())
	}
	for _, f := range []string{"make_buffer", "leak_string"} {
		if !strings.Contains(stderr.String(), f) {
			t.Errorf("run -check: %s is not among the call stacks shown:\n%s", f, stderr.String())
		}
	}

	stdout.Reset()
	code, err = run([]string{"check", "-max-in-use-at-exit", "0", "-suppressions", supp, trace}, &stdout, &stderr)
	if code != 0 || err != nil {
		t.Fatalf("check with valgrind's suppressions: status %d (%v), want 0\n%s", code, err, stdout.String())
	}
	if line := "suppressed: " + report.Size(want.InUseBytes) + " in " + report.Plural(want.InUseBlocks, "block"); !strings.Contains(stdout.String(), line) {
		t.Errorf("check with valgrind's suppressions: no %q in\n%s", line, stdout.String())
	}
}
