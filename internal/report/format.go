package report

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/trace"
)

// Count writes n with thousands separators: 2,040,000.
func Count(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Plural writes n and the noun, with an s (es after an s) if n is not 1:
// "1 block", "2,048 blocks", "3 processes".
func Plural(n uint64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "s") {
		return Count(n) + " " + noun + "es"
	}
	return Count(n) + " " + noun + "s"
}

// times writes how many times something happened: "once", "3 times".
func times(n uint64) string {
	if n == 1 {
		return "once"
	}
	return Count(n) + " times"
}

var byteUnits = []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// Size writes a number of bytes for reading at a glance, with three or four
// significant digits: "204 bytes", "2.39 KiB", "999.9 KiB", "1.95 MiB".
func Size(n uint64) string {
	if n < 1024 {
		return Plural(n, "byte")
	}
	v, unit := float64(n)/1024, 0
	for v >= 1024 && unit < len(byteUnits)-1 {
		v /= 1024
		unit++
	}
	if v < 10 {
		return fmt.Sprintf("%.2f %s", v, byteUnits[unit])
	}
	return fmt.Sprintf("%.1f %s", v, byteUnits[unit])
}

// exactSize writes a number of bytes at a glance and exactly, where the
// exact number matters: "1.95 MiB (2,040,000 bytes)".
func exactSize(n uint64) string {
	if n < 1024 {
		return Size(n)
	}
	return fmt.Sprintf("%s (%s bytes)", Size(n), Count(n))
}

// Duration writes a time span given in ns, in ms or s unless it is
// shorter than 10 µs: "0.30 ms", "12.5 ms", "3.27 s", "7.5 µs".
func Duration[T ~uint64 | ~int64](span T) string {
	ns := uint64(max(span, 0))
	ms := float64(ns) / 1e6
	switch {
	case ns < 1000:
		return fmt.Sprintf("%d ns", ns)
	case ns < 10_000:
		return fmt.Sprintf("%.1f µs", float64(ns)/1e3)
	case ms < 10:
		return fmt.Sprintf("%.2f ms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.1f ms", ms)
	case ms < 100_000:
		return fmt.Sprintf("%.2f s", ms/1000)
	}
	return fmt.Sprintf("%.0f s", ms/1000)
}

// percent writes part as a percentage of whole: "58.3%".
func percent(part, whole uint64) string {
	if whole == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

// commandLine writes the arguments of p as a shell would take them, or its
// executable if it has none.
func commandLine(p *analysis.Process) string {
	if len(p.Args) == 0 {
		return Printable(p.Exe)
	}
	return CommandLine(p.Args)
}

// Printable returns s as it may go to a terminal: the names a trace holds
// (a file name from a #line directive can hold any byte) would otherwise
// move the cursor, retitle the window or recolor what follows. C0 and C1
// control characters, DEL and bytes that are not UTF-8 are written as Go
// writes them in strings: \x1b, \u009b. Every text rendering of a name
// from a trace or a binary goes through here; JSON is escaped by its
// encoder.
func Printable(s string) string {
	if printableASCII(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case isControl(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case isControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// printableASCII reports whether s is ASCII without control characters:
// most names, which Printable returns as they are.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// isControl reports whether r is a C0 or C1 control character or DEL.
func isControl(r rune) bool {
	return r < 0x20 || r >= 0x7f && r <= 0x9f
}

// CommandLine writes args as a shell would take them.
func CommandLine(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// shellQuote quotes s for a shell, in single quotes if it needs any, or
// in bash's $'...' if it holds what Printable escapes, whose escapes that
// quoting reads back.
func shellQuote(s string) string {
	if Printable(s) != s {
		return "$'" + Printable(strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)) + "'"
	}
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ending says how p ended: "exited with status 3", "killed by signal 11
// (segmentation fault)".
func ending(p *analysis.Process) string {
	if !p.Ended {
		return "end not recorded"
	}
	return Ending(p.How, p.Code)
}

// Ending says how a process ended, given how and its code.
func Ending(how trace.EndHow, code int64) string {
	switch how {
	case trace.EndExited:
		return fmt.Sprintf("exited with status %d", code)
	case trace.EndSignaled:
		return "killed by " + trace.Signal(code)
	case trace.EndUnknown:
		return "ended without a known status"
	case trace.EndExecUnrecorded:
		if code == trace.UnrecordedStatic {
			return "exec'd a program not recorded: statically linked"
		}
	}
	return how.String()
}

// endName names how p ended, for programs.
func endName(p *analysis.Process) string {
	if !p.Ended {
		return "not_recorded"
	}
	switch p.How {
	case trace.EndExited:
		return "exited"
	case trace.EndSignaled:
		return "signaled"
	case trace.EndExec:
		return "exec"
	case trace.EndRunning:
		return "running"
	case trace.EndExecUnrecorded:
		return "exec_unrecorded"
	}
	return "unknown"
}

// sinceStart returns the time t of p, in ns since the start of p.
func sinceStart(p *analysis.Process, t uint64) uint64 {
	if t < p.Start {
		return 0
	}
	return t - p.Start
}
