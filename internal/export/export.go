// Package export writes the analysis of a trace in the formats of other
// tools, so that what memtrail recorded can be looked at with them:
//
//   - pprof's profile.proto (go tool pprof, Pyroscope, Parca),
//   - valgrind massif's massif.out (ms_print, massif-visualizer),
//   - collapsed stacks (flamegraph.pl, speedscope),
//   - Parquet tables of the events and the call stacks (DuckDB, Spark,
//     Trino, ClickHouse).
//
// The first three render one process of an analysis.Model, as the reports
// do; Parquet streams the trace itself, whose events no model keeps.
// Formats lists them with how each is written, for memtrail export, its
// shell completion and the web UI's downloads alike.
package export

import (
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
)

// noStackName stands for the frames of allocations made without a call
// stack, so that what they allocated still adds up to the totals.
const noStackName = "(no call stack)"

// commandLine returns the command line of p as one line of text.
func commandLine(p *analysis.Process) string {
	args := p.Args
	if len(args) == 0 {
		args = []string{p.Exe}
	}
	return oneLine(strings.Join(args, " "))
}

// oneLine replaces the line breaks of s by spaces: every format here is
// made of lines.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}
