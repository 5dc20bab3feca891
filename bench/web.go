package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/memtrail/memtrail/internal/report"
)

// webTrace is a trace the web benchmark records and serves.
type webTrace struct {
	workload string // the workload -only names it by
	name     string
	args     []string
	env      []string
	// cold: every run starts memtrail view with no analysis cache beside
	// the trace (the first look at a big trace), rather than after
	// memtrail report made one.
	cold bool
}

// webTraces returns the traces of the web benchmark -only names (dense
// and python3 if it names none; bigheap only when it is named, as in the
// recording benchmark).
func webTraces(dir, only string) ([]webTrace, error) {
	all := allWebTraces(dir)
	if only == "" {
		return all[:2], nil
	}
	var names []string
	for _, tr := range all {
		names = append(names, tr.workload)
	}
	var list []webTrace
	for _, name := range strings.Split(only, ",") {
		i := slices.Index(names, name)
		if i < 0 {
			return nil, fmt.Errorf("-web -only: no web trace of %q (there are %s)", name, strings.Join(names, ", "))
		}
		list = append(list, all[i])
	}
	return list, nil
}

// allWebTraces are the traces the web benchmark knows, the ones it
// measures when -only names none first.
func allWebTraces(dir string) []webTrace {
	return []webTrace{
		{workload: "dense", name: "dense, 50M events", args: []string{filepath.Join(dir, "dense"), "25000000"}},
		{workload: "python3", name: "python3, 8.6M events", args: workloadArgs(dir, "python3"), env: []string{"PYTHONMALLOC=malloc"}},
		{workload: "bigheap", name: fmt.Sprintf("bigheap, %s blocks, %s live at exit", report.Count(uint64(bigheapBlocks)), report.Count(uint64(bigheapBlocks/2))),
			args: workloadArgs(dir, "bigheap"), cold: true},
	}
}

// webBench measures memtrail view on big traces: how long after the page
// is asked for its timeline has arrived (the requests the UI makes first),
// and how long each request of an interaction takes, with the analysis
// of the trace in its cache (memtrail report made it), or with none for
// a cold trace.
func webBench(memtrail, dir string, runs int, only string) error {
	traces, err := webTraces(dir, only)
	if err != nil {
		return err
	}
	fmt.Printf("\nThe web UI (memtrail view) on big traces; medians of %d runs.\n", runs)
	for _, tr := range traces {
		trace := filepath.Join(dir, "web.mtr")
		os.Remove(trace + ".cache")
		rec := exec.Command(memtrail, append([]string{"run", "-q", "-o", trace, "--"}, tr.args...)...)
		rec.Dir, rec.Env = dir, append(os.Environ(), tr.env...)
		if out, err := rec.CombinedOutput(); err != nil {
			return fmt.Errorf("recording %s: %v\n%s", tr.name, err, out)
		}
		var analysis time.Duration
		if !tr.cold {
			start := time.Now()
			if out, err := exec.Command(memtrail, "report", trace).CombinedOutput(); err != nil {
				return fmt.Errorf("report %s: %v\n%s", tr.name, err, out)
			}
			analysis = time.Since(start)
		}
		if err := webRuns(os.Stdout, memtrail, trace, tr.name, analysis, tr.cold, runs); err != nil {
			return err
		}
	}
	return nil
}

// webRuns starts memtrail view on trace runs times and times its answers,
// removing the analysis cache before each run if cold.
func webRuns(w io.Writer, memtrail, trace, name string, analysis time.Duration, cold bool, runs int) error {
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
		{what: "a window of 5% in the middle of the run (a new analysis)",
			window: func(run, r uint64) (uint64, uint64) { return run*45/100 + r, run/2 + r }},
		{what: "a window of 5% ending at nine tenths of the run (a new analysis)",
			window: func(run, r uint64) (uint64, uint64) { return run*85/100 + r, run*9/10 + r }},
		{what: "a window of 40% from the start of the run (a new analysis)",
			window: func(run, r uint64) (uint64, uint64) { return r, run*4/10 + r }},
		{what: "a window of 40% ending at nine tenths of the run (a new analysis)",
			window: func(run, r uint64) (uint64, uint64) { return run/2 + r, run*9/10 + r }},
	}
	times := make([][]time.Duration, len(steps))
	var ready, timeline, warm []time.Duration
	var rss []int64 // memtrail view's peak RSS, KiB
	for r := range uint64(runs) {
		if cold {
			if err := os.Remove(trace + ".cache"); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
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
				rss = append(rss, hwm(view.Process.Pid))
				view.Process.Kill()
				view.Wait()
			}()
			url, token, err := servedAt(stdout)
			if err != nil {
				return fmt.Errorf("memtrail view %s: %w", name, err)
			}
			ready = append(ready, time.Since(start))
			// A client that keeps the cookie the first request
			// with the token sets, as the browser does.
			jar, err := cookiejar.New(nil)
			if err != nil {
				return err
			}
			client := &http.Client{Jar: jar}
			var run uint64 // the process's run time, once its background work is done
			for i, s := range steps {
				if i == 1 {
					timeline = append(timeline, time.Since(start))
					// The interactions come once the server is
					// done with its background work.
					if err := waitReady(client, url); err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
					warm = append(warm, time.Since(start))
					if run, err = runTime(client, url); err != nil {
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
					if p == "/" {
						p = "/?token=" + token
					}
					if err := get(client, url+p); err != nil {
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
	if cold {
		fmt.Fprintf(w, "\n%s, no analysis cache beside the trace at the start of each run: memtrail view was serving %s after it started; "+
			"the first timeline had arrived %s after it started (the page and its first requests, the last /api/view?view=timeline); "+
			"done with its background work (frames, checkpoints, stretches) %s after it started; every step after the first was asked for then. "+
			"Its peak RSS: %s.\n\n",
			name, ms(medianOf(ready)), ms(medianOf(timeline)), ms(medianOf(warm)), mib(medianKiB(rss)))
	} else {
		fmt.Fprintf(w, "\n%s: the first analysis (memtrail report) took %.2f s; memtrail view was serving %s after it started, "+
			"and done with its background work (frames, checkpoints, stretches) %s after it started; every step after the first was asked for then. "+
			"Its peak RSS: %s.\n\n",
			name, analysis.Seconds(), ms(medianOf(ready)), ms(medianOf(warm)), mib(medianKiB(rss)))
	}
	fmt.Fprintln(w, "| step | requests | time |")
	fmt.Fprintln(w, "|---|---|---|")
	var slowestWindow time.Duration
	for i, s := range steps {
		fmt.Fprintf(w, "| %s | %d | %s |\n", s.what, max(len(s.paths), 1), ms(medianOf(times[i])))
		if s.window != nil {
			slowestWindow = max(slowestWindow, medianOf(times[i]))
		}
	}
	if cold {
		webBars(w, medianOf(timeline), slowestWindow)
	}
	return nil
}

// Issue 20's bars for the web UI on a big trace.
const (
	firstTimelineBar = 2 * time.Second
	windowBar        = time.Second
)

// webBars prints the web UI's bars on a cold trace against what was
// measured: the first timeline from the start of memtrail view, and the
// slowest median of the time windows.
func webBars(w io.Writer, timeline, slowestWindow time.Duration) {
	met := func(d, bar time.Duration) string {
		if d < bar {
			return "yes"
		}
		return "no"
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| bar | measured | met? |")
	fmt.Fprintln(w, "|---|---|---|")
	fmt.Fprintf(w, "| the first timeline appears in under %s (memtrail view started with no analysis cache, to /api/view?view=timeline answered) | %s | %s |\n",
		ms(firstTimelineBar), ms(timeline), met(timeline, firstTimelineBar))
	fmt.Fprintf(w, "| any time window answers in under %s (the slowest window's median) | %s | %s |\n",
		ms(windowBar), ms(slowestWindow), met(slowestWindow, windowBar))
}

// runTime returns how long the program of the trace memtrail view serves
// at url ran, in ns.
func runTime(client *http.Client, url string) (uint64, error) {
	resp, err := client.Get(url + "/api/view?view=summary&top=50")
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

// readyWait bounds how long waitReady waits: the background work on the
// scale run's trace of 100M blocks takes minutes on a small machine.
const readyWait = 15 * time.Minute

// waitReady waits until memtrail view at url says its background work is
// done.
func waitReady(client *http.Client, url string) error {
	deadline := time.Now().Add(readyWait)
	for time.Now().Before(deadline) {
		resp, err := client.Get(url + "/api/status")
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
	return fmt.Errorf("memtrail view not ready after %v", readyWait)
}

// servedAt reads the address memtrail view prints, and returns the
// server's root (no slash at its end) and the token every request needs.
func servedAt(stdout io.Reader) (url, token string, err error) {
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return "", "", fmt.Errorf("no address printed: %v", err)
	}
	m := servedLine.FindStringSubmatch(line)
	if m == nil {
		return "", "", fmt.Errorf("no address with a token in %q", line)
	}
	return m[1], m[2], nil
}

// servedLine matches the address in memtrail view's first line.
var servedLine = regexp.MustCompile(`(http://[^ /]+)/\?token=([0-9a-f]+)`)

func get(client *http.Client, url string) error {
	resp, err := client.Get(url)
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

func medianKiB(kib []int64) int64 {
	s := slices.Clone(kib)
	slices.Sort(s)
	return s[len(s)/2]
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
