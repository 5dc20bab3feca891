package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/memtrail/memtrail/internal/report"
)

// analysisBench measures how fast the traces of a workload are read:
// heaptrack_print on heaptrack's trace against memtrail report on
// memtrail's, both of the same workload recorded in this run (the cache
// off, so that memtrail replays the whole trace), and memtrail report
// again with its cache (a second look at the same trace).
func analysisBench(memtrail, dir string, runs int, only string) error {
	fmt.Printf("\nReading a trace: heaptrack_print against memtrail report on the traces of the same workload, %d runs each, medians.\n\n", runs)
	fmt.Println("| workload | events | command | wall | CPU | peak RSS | events/s | ×heaptrack_print's speed |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, w := range chosen(dir, only) {
		args := w.args(dir)
		events, err := countEvents(memtrail, args, w.env, dir)
		if err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		ht := filepath.Join(dir, "analysis-ht")
		mt := filepath.Join(dir, "analysis.mtr")
		for _, t := range tools(memtrail, []string{"heaptrack", "memtrail"}) {
			out := ht
			if t.name == "memtrail" {
				out = strings.TrimSuffix(mt, ".mtr")
			}
			if _, err := measure(t, args, w.env, dir); err != nil {
				return fmt.Errorf("%s under %s: %w", w.name, t.name, err)
			}
			if err := os.Rename(t.file(filepath.Join(dir, "trace")), t.file(out)); err != nil {
				return err
			}
		}
		commands := []struct {
			name string
			args []string
		}{
			{"heaptrack_print", []string{"heaptrack_print", ht + ".zst"}},
			{"memtrail report", []string{memtrail, "report", "-cache=false", mt}},
			{"memtrail report, cached", []string{memtrail, "report", mt}},
		}
		// The cached command reads what the first cached run wrote.
		os.Remove(mt + ".cache")
		if err := exec.Command(memtrail, "report", mt).Run(); err != nil {
			return fmt.Errorf("memtrail report %s: %w", mt, err)
		}
		results := make([][]sample, len(commands))
		for r := 0; r < runs; r++ {
			for i, c := range commands {
				s, err := timeCommand(c.args)
				if err != nil {
					return fmt.Errorf("%s: %w", c.name, err)
				}
				results[i] = append(results[i], s)
			}
		}
		base := median(results[0])
		for i, c := range commands {
			m := median(results[i])
			fmt.Printf("| %s | %s | %s | %.2f s | %.2f s | %.0f MiB | %.3g | %.2f |\n", w.name, report.Count(uint64(events)), c.name,
				m.wall.Seconds(), m.cpu.Seconds(), float64(m.rssKiB)/1024, float64(events)/m.wall.Seconds(),
				ratio(base.wall, m.wall))
		}
	}
	return nil
}

// timeCommand runs a command that reads a trace, its output thrown away,
// and returns its wall and CPU time and peak RSS.
func timeCommand(args []string) (sample, error) {
	cmd := exec.Command(args[0], args[1:]...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	s, err := runPolled(cmd, args[0])
	if err != nil {
		return s, fmt.Errorf("%v: %v\n%.500s", args, err, out.String())
	}
	return s, nil
}
