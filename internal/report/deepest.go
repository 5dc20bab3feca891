package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/stackdepth"
)

// StackUsage is the static frame size of each function, as gcc's
// -fstack-usage writes it in .su files: what the report shows next to a
// frame of the deepest stack when the trace has no size of its own for it
// (a stack sampled at a heap event).
type StackUsage map[string]uint64

// ReadStackUsage reads the .su files under dir (and its subdirectories).
// A line is file:line:column:function, a tab, the frame's size in bytes, a
// tab, and static, dynamic or dynamic,bounded; dynamic frames are left
// out, as is a function two files give different sizes.
func ReadStackUsage(dir string) (StackUsage, error) {
	usage, clash := StackUsage{}, map[string]bool{}
	files := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".su") {
			return err
		}
		files++
		return readSUFile(path, usage, clash)
	})
	if err != nil {
		return nil, fmt.Errorf("reading stack usage: %w", err)
	}
	if files == 0 {
		return nil, fmt.Errorf("reading stack usage: no .su files in %s (compile with -fstack-usage)", dir)
	}
	for f := range clash {
		delete(usage, f)
	}
	return usage, nil
}

func readSUFile(path string, usage StackUsage, clash map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	lines, err := stackdepth.ParseStackUsage(f, path)
	if err != nil {
		return err
	}
	for _, su := range lines {
		if su.Dynamic {
			continue // alloca or a VLA: no one size
		}
		if old, ok := usage[su.Function]; ok && old != su.Bytes {
			clash[su.Function] = true
		}
		usage[su.Function] = su.Bytes
	}
	return nil
}

// deepestFrame is a frame of the deepest stack with its frame size and
// where the size comes from ("" if not known).
type deepestFrame struct {
	analysis.SizedFrame
	from  string // "trace" or ".su"
	times int    // how many times it comes in a row
}

// sizedDeepest returns the frames of p's deepest stack with their sizes,
// from the trace or else from usage, each on its own.
func sizedDeepest(p *analysis.Process, usage StackUsage) []deepestFrame {
	var list []deepestFrame
	for _, f := range p.DeepestFrames() {
		df := deepestFrame{SizedFrame: f, from: "trace", times: 1}
		if !f.HasSize {
			df.from = ""
			if size, ok := usage[f.Function]; ok && f.Function != "" && !f.Inlined {
				df.Size, df.HasSize, df.from = size, true, ".su"
			}
		}
		list = append(list, df)
	}
	return list
}

// deepestFrames returns the frames of p's deepest stack as the text
// report lists them: sizedDeepest's, a frame repeated in a row made one.
func deepestFrames(p *analysis.Process, usage StackUsage) []deepestFrame {
	var list []deepestFrame
	for _, df := range sizedDeepest(p, usage) {
		if n := len(list); n > 0 && sameFrame(list[n-1].SizedFrame, df.SizedFrame) {
			list[n-1].times++
			continue
		}
		list = append(list, df)
	}
	return list
}

// sameFrame reports whether two frames in a row are a recursion to show
// as one line: the same function, source line and size, whatever their
// return addresses. A frame with no function is known only by its
// address, so two of them are the same only at the same address: in an
// unnamed object, distinct functions would otherwise read as one.
func sameFrame(a, b analysis.SizedFrame) bool {
	if a.Function != "" {
		a.Address, b.Address = 0, 0
	}
	return a == b
}

// deepest writes where the stack went deepest: the thread, the time, the
// frames and what each took.
func (t *textReport) deepest() {
	p := t.p
	d := p.Summary.DeepestStack
	if d.Bytes == 0 {
		return
	}
	at := "at its deepest heap event"
	if d.FunctionEntry {
		at = "at a function entry"
	}
	t.printf("\nDeepest stack: %s in thread %d, %s (%s), in:\n", exactSize(d.Bytes), d.Thread,
		afterStart(t.m, p, d.Time), at)
	if d.Stack == 0 {
		t.printf("    (no call stack recorded)\n")
		return
	}
	frames := deepestFrames(p, t.opts.StackUsage)
	shown := min(len(frames), t.opts.frames())
	var sized uint64
	fromSU, anySize := false, false
	for _, f := range frames {
		anySize = anySize || f.HasSize
	}
	for _, f := range frames[:shown] {
		size := ""
		if f.HasSize {
			size = Size(f.Size)
			if f.from == ".su" {
				size += "*"
				fromSU = true
			}
		}
		line := t.frameLine(f.Frame)
		if f.times > 1 {
			line = fmt.Sprintf("%s × %d", line, f.times)
			if f.HasSize {
				size += " each"
			}
		}
		if anySize {
			t.printf("  %14s  %s\n", size, line)
		} else {
			t.printf("    %s\n", line)
		}
	}
	for _, f := range frames {
		if f.HasSize {
			sized += f.Size * uint64(f.times)
		}
	}
	if more := len(frames) - shown; more > 0 {
		indent := "    "
		if anySize {
			indent = strings.Repeat(" ", 18)
		}
		t.printf("%s... %d more %s\n", indent, more, map[bool]string{true: "frame", false: "frames"}[more == 1])
	}
	switch {
	case d.FunctionEntry:
		t.printf("  (each frame's size is from its stack pointer to its caller's; the outermost's from the stack's base)\n")
	case fromSU:
		t.printf("  (* each frame's size as gcc -fstack-usage gives it: %s of the %s)\n", Size(sized), Size(d.Bytes))
	}
}

type jsonDeepest struct {
	Bytes         uint64             `json:"bytes"`
	Thread        uint64             `json:"thread"`
	TimeNS        uint64             `json:"time_ns"`
	FunctionEntry bool               `json:"function_entry"` // else the deepest heap event
	Stack         []jsonDeepestFrame `json:"stack"`
}

type jsonDeepestFrame struct {
	jsonFrame
	// FrameBytes is the bytes of stack the frame took, if known, and
	// FrameBytesFrom where that comes from: "trace" (the unwinder's
	// stack pointers) or ".su" (gcc -fstack-usage).
	FrameBytes     *uint64 `json:"frame_bytes,omitempty"`
	FrameBytesFrom string  `json:"frame_bytes_from,omitempty"`
}

func jsonDeepestOf(p *analysis.Process, usage StackUsage) *jsonDeepest {
	d := p.Summary.DeepestStack
	if d.Bytes == 0 {
		return nil
	}
	js := &jsonDeepest{Bytes: d.Bytes, Thread: d.Thread, TimeNS: sinceStart(p, d.Time), FunctionEntry: d.FunctionEntry,
		Stack: []jsonDeepestFrame{}}
	// Every frame with its own address: a program reading the JSON
	// collapses recursions as it sees fit.
	for _, f := range sizedDeepest(p, usage) {
		jf := jsonDeepestFrame{jsonFrame: jsonFrames([]analysis.Frame{f.Frame})[0]}
		if f.HasSize {
			size := f.Size
			jf.FrameBytes, jf.FrameBytesFrom = &size, f.from
		}
		js.Stack = append(js.Stack, jf)
	}
	return js
}
