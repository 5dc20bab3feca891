// Package report renders the analysis of a trace for people, as text, and
// for programs, as JSON: the report of one process, with its totals, the
// call stacks that weighed most by several measures, what went wrong with
// its frees, and a list of the trace's other processes to pick from.
package report

import (
	"github.com/memtrail/memtrail/internal/analysis"
)

// Options say what to report.
type Options struct {
	// PID is the process to report on, and Image which of the program
	// images it had in turn (an exec replaces the image, not the
	// process), counting from 1 (see ProcessID). Image 0 stands for the
	// last of them. PID 0 stands for the trace's first process, or the
	// image that replaced it.
	PID   uint64
	Image int
	// Top is how many call stacks each table lists; 0 means 10.
	Top int
	// Frames is how many frames of each stack the text shows, the
	// innermost ones; 0 means 8. JSON has them all.
	Frames int
	// View is what to show: the name of one of Views; "" is "summary".
	View string
	// Cost is what the trees (top-down, bottom-up, callers) weigh call
	// stacks by. The call graph is in bytes allocated, as mprof's.
	Cost analysis.Cost
	// Chain is how many callers the partial call chains of the leak table
	// have; 0 means 5, as in mprof.
	Chain int
	// Objects orders the object list.
	Objects ObjectOrder
	// Color marks what went well and badly with terminal colors (check
	// and diff).
	Color bool
	// StackUsage gives frame sizes for the frames of the deepest stack
	// that the trace has none for (ReadStackUsage).
	StackUsage StackUsage
}

// paint writes s in the terminal color code if the options want colors.
func (o Options) paint(code, s string) string {
	if !o.Color {
		return s
	}
	return "\033[" + code + "m" + s + "\033[0m"
}

const (
	red   = "31"
	green = "32"
)

// ObjectOrder is an order of the object list.
type ObjectOrder int

const (
	BySize     ObjectOrder = iota // the biggest objects live at the end
	ByAge                         // the oldest objects live at the end
	ByLifetime                    // the objects freed that lived longest
)

func (o Options) chain() int {
	if o.Chain <= 0 {
		return 5
	}
	return o.Chain
}

func (o Options) top() int {
	if o.Top <= 0 {
		return 10
	}
	return o.Top
}

func (o Options) frames() int {
	if o.Frames <= 0 {
		return 8
	}
	return o.Frames
}
