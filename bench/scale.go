package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/memtrail/memtrail/internal/report"
)

// scaleBench is issue 20's scale run: each step of memtrail once on the
// bigheap workload (made big with -scale-blocks), with the time and
// memory of each: the program alone, recorded (the leak scan at its
// exit), reported (a whole replay), and viewed with no analysis cache.
// Once, and without heaptrack: at 100M blocks each step takes minutes
// and gigabytes of a machine the other steps need too.
func scaleBench(memtrail, dir string) error {
	args := []string{filepath.Join(dir, "bigheap"), fmt.Sprint(scaleBlocks)}
	name := fmt.Sprintf("bigheap, %s blocks", report.Count(uint64(scaleBlocks)))
	fmt.Printf("\nThe scale run: %s, %s live at exit; each step once.\n\n", name, report.Count(uint64(scaleBlocks/2)))
	fmt.Println("| step | wall | CPU | peak RSS of the program | memtrail's own peak RSS | notes |")
	fmt.Println("|---|---|---|---|---|---|")

	native := exec.Command(args[0], args[1:]...)
	native.Dir, native.Stdout = dir, nil
	s, err := runPolled(native, args[0])
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	fmt.Printf("| the program alone | %s | %s | %s | — | — |\n", secs(s.wall), secs(s.cpu), mib(s.rssKiB))

	trace := filepath.Join(dir, "scale.mtr")
	os.Remove(trace + ".cache")
	var stderr strings.Builder
	rec := exec.Command(memtrail, append([]string{"run", "-q", "-stats", "-o", trace, "--"}, args...)...)
	rec.Dir, rec.Stderr = dir, &stderr
	s, err = runPolled(rec, args[0])
	if err != nil {
		return fmt.Errorf("%s under memtrail run: %v\n%s", name, err, stderr.String())
	}
	fi, err := os.Stat(trace)
	if err != nil {
		return fmt.Errorf("no trace: %w", err)
	}
	waits, waitTime := parseWaits(stderr.String())
	recorded := s

	var stdout strings.Builder
	rep := exec.Command(memtrail, "report", "-json", "-cache=false", trace)
	rep.Stdout, rep.Stderr = &stdout, &stderr
	s, err = runPolled(rep, memtrail)
	if err != nil {
		return fmt.Errorf("memtrail report %s: %v\n%.500s", trace, err, stderr.String())
	}
	scan, err := leakScanOf([]byte(stdout.String()))
	if err != nil {
		return fmt.Errorf("memtrail report -json %s: %w", trace, err)
	}
	fmt.Printf("| memtrail run (defaults) | %s | %s | %s | %s | the leak scan held the program %s at its exit; trace %s bytes; the program waited for the recorder %d times, %.3f s |\n",
		secs(recorded.wall), secs(recorded.cpu), mib(recorded.rssKiB), mib(recorded.toolRSSKiB), secs(scan), report.Count(uint64(fi.Size())), waits, waitTime.Seconds())
	fmt.Printf("| memtrail report -json -cache=false | %s | %s | — | %s | a whole replay of the trace |\n", secs(s.wall), secs(s.cpu), mib(s.rssKiB))
	return webRuns(os.Stdout, memtrail, trace, name, 0, true, 1)
}

// leakScanOf reads how long the leak scan held the program from the
// output of memtrail report -json.
func leakScanOf(reportJSON []byte) (time.Duration, error) {
	var rep struct {
		Summary struct {
			LeakScanNS int64 `json:"leak_scan_ns"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(reportJSON, &rep); err != nil {
		return 0, err
	}
	return time.Duration(rep.Summary.LeakScanNS), nil
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }
