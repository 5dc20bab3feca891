package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/memtrail/memtrail/internal/report"
)

// sizeValue is a flag holding a number of bytes, written as memtrail
// writes them: 4096, 64KiB, 1.5MiB, 2GiB (KB, MB, GB mean the same).
type sizeValue uint64

var sizeUnits = []struct {
	suffix string
	scale  uint64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
}

// parseSize reads a number of bytes with an optional unit.
func parseSize(s string) (uint64, error) {
	text := strings.TrimSpace(s)
	scale := uint64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(strings.ToUpper(text), strings.ToUpper(u.suffix)) {
			text, scale = strings.TrimSpace(text[:len(text)-len(u.suffix)]), u.scale
			break
		}
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil || v < 0 || v*float64(scale) >= 1<<63 {
		return 0, fmt.Errorf("%q is not a size (write e.g. 4096, 64KiB or 1.5MiB)", s)
	}
	return uint64(v * float64(scale)), nil
}

func (v *sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v = sizeValue(n)
	return nil
}

func (v *sizeValue) String() string { return report.Size(uint64(*v)) }

// sizeFlag defines a size flag.
func sizeFlag(fs *flag.FlagSet, name string, value uint64, usage string) *uint64 {
	v := sizeValue(value)
	fs.Var(&v, name, usage)
	return (*uint64)(&v)
}
