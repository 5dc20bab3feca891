package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtrail/memtrail/internal/report"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// colored reports whether what is written to w may have colors: w is a
// terminal that can show them, and NO_COLOR is not set (no-color.org).
func colored(w io.Writer) bool {
	return os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb" && isTerminal(w)
}

// progressBar returns a function that draws the progress of reading the
// trace at path on w, once the work has taken half a second, and clears it
// when done; nil if w is not a terminal: a log keeps no bars.
func progressBar(w io.Writer, path string) func(done, total int64) {
	if w == nil || !isTerminal(w) {
		return nil
	}
	start := time.Now()
	var last time.Time
	shown := false
	return func(done, total int64) {
		if done >= total {
			if shown {
				fmt.Fprint(w, "\r\033[K")
				shown = false
			}
			return
		}
		now := time.Now()
		if now.Sub(start) < 500*time.Millisecond || now.Sub(last) < 100*time.Millisecond {
			return
		}
		last, shown = now, true
		pct := int(done * 100 / total)
		fmt.Fprintf(w, "\rreading %s [%-25s] %3d%% of %s", filepath.Base(path), strings.Repeat("=", pct/4), pct, report.Size(uint64(total)))
	}
}
