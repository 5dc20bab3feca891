// Package demo holds the bundled example memtrail profiles on `memtrail
// demo`: the widget program of the mprof paper, which leaks every red widget
// it makes.
package demo

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/memtrail/memtrail/internal/agent"
)

//go:embed example/widget.c
var widgetSource []byte

// Build compiles the widget program with debug info into dir and returns
// the program's path.
func Build(dir string) (string, error) {
	cc, err := agent.Compiler()
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "widget.c")
	if err := os.WriteFile(src, widgetSource, 0o644); err != nil {
		return "", fmt.Errorf("writing the example: %w", err)
	}
	prog := filepath.Join(dir, "widget")
	out, err := exec.Command(cc, "-g", "-O0", "-o", prog, src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building the example: %w\n%s", err, out)
	}
	return prog, nil
}
