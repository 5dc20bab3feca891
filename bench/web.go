package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// webBench measures memtrail view on big traces: how long after the page
// is asked for its timeline has arrived (the requests the UI makes first),
// and how long each request of an interaction takes, with the analysis
// of the trace in its cache (memtrail report made it).
func webBench(memtrail, dir string, runs int) error {
	fmt.Printf("\nThe web UI (memtrail view) on big traces, the analysis cached; medians of %d runs.\n", runs)
	traces := []struct {
		name string
		args []string
		env  []string
	}{
		{"dense, 50M events", []string{filepath.Join(dir, "dense"), "25000000"}, nil},
		{"python3, 8.6M events", workloadArgs(dir, "python3"), []string{"PYTHONMALLOC=malloc"}},
	}
	for _, tr := range traces {
		trace := filepath.Join(dir, "web.mtr")
		os.Remove(trace + ".cache")
		rec := exec.Command(memtrail, append([]string{"run", "-q", "-o", trace, "--"}, tr.args...)...)
		rec.Dir, rec.Env = dir, append(os.Environ(), tr.env...)
		if out, err := rec.CombinedOutput(); err != nil {
			return fmt.Errorf("recording %s: %v\n%s", tr.name, err, out)
		}
		start := time.Now()
		if out, err := exec.Command(memtrail, "report", trace).CombinedOutput(); err != nil {
			return fmt.Errorf("report %s: %v\n%s", tr.name, err, out)
		}
		analysis := time.Since(start)
		if err := webRuns(memtrail, trace, tr.name, analysis, runs); err != nil {
			return err
		}
	}
	return nil
}

// webRuns starts memtrail view on trace runs times and times its answers.
func webRuns(memtrail, trace, name string, analysis time.Duration, runs int) error {
	// The requests of the UI, each once per run, in order: the page and
	// what it asks for first, then one interaction each.
	// A window of the run is a share of it, other ones in every run r so
	// that the trace's cache holds none: from and to in ns after the start.
	type window func(run, r uint64) (from, to uint64)
	steps := []struct {
		what   string
		paths  []string
		window window // if set, the one path is a window's
	}{
		{what: "page to timeline", paths: []string{"/", "/app.js", "/style.css", "/api/view?view=summary", "/api/view?view=timeline"}},
		{what: "flame graph, bytes at the peak", paths: []string{"/api/view?view=top-down"}},
		{what: "flame graph, by another cost", paths: []string{"/api/view?view=top-down&cost=allocated"}},
		{what: "flame graph, inverted", paths: []string{"/api/view?view=bottom-up"}},
		{what: "leaks", paths: []string{"/api/view?view=summary&top=50", "/api/view?view=leaks"}},
		{what: "table: callers", paths: []string{"/api/view?view=callers"}},
		{what: "table: call graph", paths: []string{"/api/view?view=callgraph"}},
		{what: "objects", paths: []string{"/api/view?view=objects"}},
		{what: "click on the timeline: the events of a step", paths: []string{"/api/events?from=1000000&to=1001000"}},
		{what: "a window of 5% in the first tenth of the run (a new analysis)",
			window: func(run, r uint64) (uint64, uint64) { return run * (r + 1) / 100, run * (r + 6) / 100 }},
		{what: "a window of 5% ending at nine tenths of the run (a new analysis)",
			window: func(run, r uint64) (uint64, uint64) { return run*85/100 + r, run*9/10 + r }},
		{what: "a window of 40% ending at nine tenths of the run (a new analysis)",
			window: func(run, r uint64) (uint64, uint64) { return run/2 + r, run*9/10 + r }},
	}
	times := make([][]time.Duration, len(steps))
	var ready, warm []time.Duration
	for r := range uint64(runs) {
		start := time.Now()
		view := exec.Command(memtrail, "view", trace)
		stdout, err := view.StdoutPipe()
		if err != nil {
			return err
		}
		if err := view.Start(); err != nil {
			return err
		}
		err = func() error {
			defer func() {
				view.Process.Kill()
				view.Wait()
			}()
			url, err := servedAt(stdout)
			if err != nil {
				return fmt.Errorf("memtrail view %s: %w", name, err)
			}
			ready = append(ready, time.Since(start))
			var run uint64 // the process's run time, once its background work is done
			for i, s := range steps {
				if i == 1 {
					// The interactions come once the server is
					// done with its background work.
					if err := waitReady(url); err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
					warm = append(warm, time.Since(start))
					if run, err = runTime(url); err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
				}
				paths := s.paths
				if s.window != nil {
					from, to := s.window(run, r)
					paths = []string{fmt.Sprintf("/api/view?view=timeline&from=%d&to=%d", from, to)}
				}
				t0 := time.Now()
				for _, p := range paths {
					if err := get(url + p); err != nil {
						return fmt.Errorf("%s: %s: %w", name, p, err)
					}
				}
				times[i] = append(times[i], time.Since(t0))
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	fmt.Printf("\n%s: the first analysis (memtrail report) took %.2f s; memtrail view was serving %s after it started, and done with its background work (frames, checkpoints, stretches) %s after it started; every step after the first was asked for then.\n\n",
		name, analysis.Seconds(), ms(medianOf(ready)), ms(medianOf(warm)))
	fmt.Println("| step | requests | time |")
	fmt.Println("|---|---|---|")
	for i, s := range steps {
		fmt.Printf("| %s | %d | %s |\n", s.what, max(len(s.paths), 1), ms(medianOf(times[i])))
	}
	return nil
}

// runTime returns how long the program of the trace memtrail view serves
// at url ran, in ns.
func runTime(url string) (uint64, error) {
	resp, err := http.Get(url + "/api/view?view=summary&top=50")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum struct {
		Summary struct {
			RunTimeNS uint64 `json:"run_time_ns"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&sum); err != nil {
		return 0, err
	}
	return sum.Summary.RunTimeNS, nil
}

// waitReady waits until memtrail view at url says its background work is
// done.
func waitReady(url string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url + "/api/status")
		if err != nil {
			return err
		}
		var st struct{ Ready bool }
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if st.Ready {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("memtrail view not ready after 2 minutes")
}

// servedAt reads the address memtrail view prints.
func servedAt(stdout io.Reader) (string, error) {
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("no address printed: %v", err)
	}
	m := regexp.MustCompile(`http://[^ ]+/`).FindString(line)
	if m == "" {
		return "", fmt.Errorf("no address in %q", line)
	}
	return strings.TrimSuffix(m, "/"), nil
}

func get(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

func medianOf(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// workloadArgs returns the command line of the workload of that name.
func workloadArgs(dir, name string) []string {
	for _, w := range workloads(dir) {
		if w.name == name {
			return w.args(dir)
		}
	}
	panic("no workload " + name)
}
