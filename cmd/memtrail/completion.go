package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/memtrail/memtrail/internal/export"
)

func completionCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlags("completion", "bash|zsh|fish",
		`eval "$(memtrail completion bash)"   # or add it to ~/.bashrc; zsh: ~/.zshrc; fish: memtrail completion fish | source`, stderr)
	if err := parse(fs, args); err != nil {
		return 2, err
	}
	if fs.NArg() != 1 {
		return 2, usageError{"needs the name of a shell: bash, zsh or fish"}
	}
	cmds := completions()
	switch fs.Arg(0) {
	case "bash":
		fmt.Fprint(stdout, bashCompletion(cmds))
	case "zsh":
		// zsh runs bash's completion functions through bashcompinit.
		fmt.Fprint(stdout, "autoload -U +X bashcompinit && bashcompinit\n"+bashCompletion(cmds))
	case "fish":
		fmt.Fprint(stdout, fishCompletion(cmds))
	default:
		return 2, usageError{fmt.Sprintf("unknown shell %q: bash, zsh or fish", fs.Arg(0))}
	}
	return 0, nil
}

// completion is what a shell completes after memtrail: a command, its
// flags, and the values of those that take one of a list.
type completion struct {
	name, summary string
	flags         []string
	values        map[string][]string // by flag, "-view"
}

// flagValues returns the values the shells offer after the flags of
// command, from the lists the command checks them against.
func flagValues(command string) map[string][]string {
	switch command {
	case "report":
		return map[string][]string{"-view": viewList()}
	case "export":
		var formats []string
		for _, f := range export.Formats {
			formats = append(formats, f.Name)
		}
		return map[string][]string{"-format": formats}
	}
	return nil
}

// flagLine is a flag in a command's help: "  -name value".
var flagLine = regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)

// completions lists the commands and their flags, read from their own
// --help, so that the scripts never fall behind them.
func completions() []completion {
	var list []completion
	for _, c := range commands() {
		var help bytes.Buffer
		run([]string{c.name, "--help"}, &help, io.Discard)
		var flags []string
		for _, m := range flagLine.FindAllStringSubmatch(help.String(), -1) {
			flags = append(flags, "-"+m[1])
		}
		slices.Sort(flags)
		list = append(list, completion{c.name, c.summary, slices.Compact(flags), flagValues(c.name)})
	}
	return list
}

func bashCompletion(cmds []completion) string {
	var b strings.Builder
	b.WriteString("# bash completion for memtrail: eval \"$(memtrail completion bash)\"\n")
	b.WriteString("_memtrail() {\n")
	b.WriteString("\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} flags values\n")
	b.WriteString("\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n")
	var names []string
	for _, c := range cmds {
		names = append(names, c.name)
	}
	fmt.Fprintf(&b, "\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\treturn\n\tfi\n", strings.Join(names, " "))
	b.WriteString("\tcase ${COMP_WORDS[1]} in\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "\t%s) flags=%q", c.name, strings.Join(c.flags, " "))
		if len(c.values) > 0 {
			b.WriteString("\n\t\tcase $prev in\n")
			for _, flag := range slices.Sorted(maps.Keys(c.values)) {
				fmt.Fprintf(&b, "\t\t%s|-%s) values=%q ;;\n", flag, flag, strings.Join(c.values[flag], " "))
			}
			b.WriteString("\t\tesac")
		}
		b.WriteString(" ;;\n")
	}
	b.WriteString("\tesac\n")
	b.WriteString("\tif [ -n \"$values\" ]; then\n\t\tCOMPREPLY=($(compgen -W \"$values\" -- \"$cur\"))\n")
	b.WriteString("\telif [[ $cur == -* ]]; then\n\t\tCOMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n")
	b.WriteString("\telse\n\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n\tfi\n}\n")
	b.WriteString("complete -o filenames -F _memtrail memtrail\n")
	return b.String()
}

func fishCompletion(cmds []completion) string {
	var b strings.Builder
	b.WriteString("# fish completion for memtrail: memtrail completion fish | source\n")
	b.WriteString("complete -c memtrail -f -n __fish_use_subcommand\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "complete -c memtrail -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.summary))
		for _, f := range c.flags {
			fmt.Fprintf(&b, "complete -c memtrail -n '__fish_seen_subcommand_from %s' -o %s", c.name, strings.TrimPrefix(f, "-"))
			if values := c.values[f]; len(values) > 0 {
				fmt.Fprintf(&b, " -x -a %s", fishQuote(strings.Join(values, " ")))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// fishQuote quotes s for fish: in single quotes, with \ and ' escaped.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
