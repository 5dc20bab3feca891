package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBashCompletion loads the bash completion script into a real bash
// and asks it to complete commands, flags and file names.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash runs the completion script: %v", err)
	}
	var script bytes.Buffer
	if code, err := run([]string{"completion", "bash"}, &script, os.Stderr); code != 0 || err != nil {
		t.Fatalf("completion bash: status %d, %v", code, err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "memtrail.bash")
	os.WriteFile(path, script.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "prog.mtr"), nil, 0o644)
	complete := func(words ...string) string {
		t.Helper()
		line := "source " + path + "; COMP_WORDS=(" + strings.Join(words, " ") + "); COMP_CWORD=" +
			string(rune('0'+len(words)-1)) + "; _memtrail; echo \"${COMPREPLY[*]}\""
		cmd := exec.Command(bash, "-c", line)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, c := range []struct {
		words []string
		want  string
	}{
		{[]string{"memtrail", "re"}, "report"},
		{[]string{"memtrail", "c"}, "check completion"},
		{[]string{"memtrail", "check", "-max-i"}, "-max-in-use-at-exit -max-indirectly-lost"},
		{[]string{"memtrail", "run", "-ch"}, "-check"},
		{[]string{"memtrail", "export", "-f"}, "-format"},
		{[]string{"memtrail", "report", "pro"}, "prog.mtr"},
		{[]string{"memtrail", "report", "-view", "''"}, strings.Join(viewList(), " ")},
		{[]string{"memtrail", "report", "prog.mtr", "-view", "t"}, "top-down threads timeline"},
		{[]string{"memtrail", "export", "-format", "p"}, "pprof parquet"},
		{[]string{"memtrail", "export", "-format", "''"}, "pprof collapsed massif parquet"},
		{[]string{"memtrail", "export", "-o", "pro"}, "prog.mtr"},
	} {
		if got := complete(c.words...); got != c.want {
			t.Errorf("completing %q: %q, want %q", c.words, got, c.want)
		}
	}
}

// TestCompletionScripts checks that every command and flag is in the
// fish script, and the shells memtrail does not know are refused.
func TestCompletionScripts(t *testing.T) {
	var fish bytes.Buffer
	if code, err := run([]string{"completion", "fish"}, &fish, os.Stderr); code != 0 || err != nil {
		t.Fatalf("completion fish: status %d, %v", code, err)
	}
	for _, want := range []string{"-a check -d 'check a trace against memory budgets", "'__fish_seen_subcommand_from diff' -o old-pid",
		"'__fish_seen_subcommand_from report' -o view -x -a 'summary leaks ", "'__fish_seen_subcommand_from export' -o format -x -a 'pprof collapsed massif parquet'"} {
		if !strings.Contains(fish.String(), want) {
			t.Errorf("the fish script has no %q", want)
		}
	}
	var zsh bytes.Buffer
	run([]string{"completion", "zsh"}, &zsh, os.Stderr)
	if !strings.HasPrefix(zsh.String(), "autoload -U +X bashcompinit && bashcompinit\n") {
		t.Errorf("the zsh script does not load bashcompinit first")
	}
	checkBadInput(t, []string{"completion", "tcsh"}, 2, `unknown shell "tcsh"`)
	checkBadInput(t, []string{"completion"}, 2, "needs the name of a shell")
	checkBadInput(t, []string{"version", "extra"}, 2, "takes no arguments")
}
