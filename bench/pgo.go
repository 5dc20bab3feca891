package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// pgoProfile is where go build finds the profile it optimizes memtrail
// with (profile-guided optimization): a main package's default.pgo.
const pgoProfile = "cmd/memtrail/default.pgo"

// pgoWorkloads are the workloads the profile is made of: the dense loop
// for the hot loops, real programs with many call stacks, and bigheap for
// the leak scan and the live set of millions of blocks.
const pgoWorkloads = "dense,sqlite3,jq,python3,bigheap"

// writePGO records each workload and reports on its trace, runs times,
// with memtrail profiling itself (MEMTRAIL_CPUPROFILE), and merges the
// profiles into pgoProfile: what memtrail spends its time on when it
// records and when it reads, for the compiler to inline and lay out.
func writePGO(memtrail, dir string, runs int, only string) error {
	if only == "" {
		only = pgoWorkloads
	}
	var profiles []string
	profiled := func(name string, args []string, env []string) error {
		prof := filepath.Join(dir, fmt.Sprintf("%s-%d.prof", name, len(profiles)))
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), env...), "MEMTRAIL_CPUPROFILE="+prof)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %v\n%.500s", args, err, out)
		}
		profiles = append(profiles, prof)
		return nil
	}
	for _, w := range chosen(dir, only) {
		trace := filepath.Join(dir, "pgo.mtr")
		for r := 0; r < runs; r++ {
			run := append([]string{memtrail, "run", "-q", "-o", trace, "--"}, w.args(dir)...)
			if err := profiled(w.name+"-run", run, w.env); err != nil {
				return err
			}
			if err := profiled(w.name+"-report", []string{memtrail, "report", "-cache=false", trace}, nil); err != nil {
				return err
			}
		}
	}
	out, err := exec.Command("go", append([]string{"tool", "pprof", "-proto"}, profiles...)...).Output()
	if err != nil {
		return fmt.Errorf("merging the profiles with go tool pprof: %w", err)
	}
	if err := os.WriteFile(pgoProfile, out, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s from %d profiles of %s\n", pgoProfile, len(profiles), only)
	return nil
}
