// Command bench measures memtrail against native runs and heaptrack on the
// same workloads, in one run, and prints a Markdown table of medians and
// ratios for docs/performance.md.
//
//	go run ./bench                 # all workloads, 5 runs each
//	go run ./bench -all -runs 3 -also -leak-check=false   # every figure docs/performance.md quotes, bigheap and the scale run too
//	go run ./bench -runs 3 -only dense,sqlite3
//	go run ./bench -analysis -only dense,python3   # reading traces: report against heaptrack_print
//	go run ./bench -only bigheap -also -leak-check=false   # big heap (issue 20): only when -only names it
//	go run ./bench -only bigheap -bigheap-blocks 1000000   # a smaller big heap
//	go run ./bench -scale          # the scale run: 100M blocks recorded, scanned, reported, viewed, each once (-scale-blocks)
//	go run ./bench -pgo            # remake cmd/memtrail/default.pgo, the profile memtrail is built with
//	go run ./bench -web            # memtrail view on a 50M-event trace: page to timeline, each interaction
//	go run ./bench -web -only bigheap   # memtrail view on bigheap's trace with no analysis cache: the first timeline, time windows
//	go run ./bench -baseline REV   # also memtrail as of git revision REV, to measure a change
//	go run ./bench -also -stack-calls -only calls   # also memtrail run -stack-calls (exact stack)
//	go run ./bench -also -leak-check=false -also -leak-origins   # two more rows: without the leak scan, with leak origins
//
// The workloads need a C compiler, heaptrack, sqlite3, jq and python3.
//
// For each workload and tool it measures the wall time and the CPU time
// (user+sys of the tool and everything it started), the peak resident set
// of the workload's own process (polled from /proc: what the tool adds to
// the program), and the trace's size per event. The workloads bench
// compiles itself are also built with -fsanitize=leak and run with
// LeakSanitizer's scan at exit on and off, to set memtrail's leak scan
// beside LSan's on the same program. Runs of the tools are interleaved so
// that a noisy neighbour hurts them alike.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/memtrail/memtrail/internal/report"
)

// workload is a program to measure.
type workload struct {
	name  string
	about string
	args  func(dir string) []string // the command line, given the build directory
	env   []string
	// optIn workloads run only when -only names them: bigheap takes
	// minutes and a gigabyte per run under the three tools.
	optIn bool
}

func workloads(dir string) []workload {
	sql := "create table t(a integer primary key, b text, c blob);" +
		"insert into t select value, printf('row %d', value), randomblob(64) from generate_series(1,200000);" +
		"select count(*), sum(length(b)) from t;"
	return []workload{
		{"dense", "malloc-dense loop: 16M random free+malloc of 8-520 bytes among 4,096 slots, one thread",
			func(d string) []string { return []string{filepath.Join(d, "dense")} }, nil, false},
		{"crossfree", "4 threads, each freeing the blocks another allocated (2M allocations per thread)",
			func(d string) []string { return []string{filepath.Join(d, "crossfree"), "4", "2000000"} }, nil, false},
		{"threads", "8 threads at once, each running the malloc-dense loop on its own 1,024 slots (1M iterations per thread)",
			func(d string) []string { return []string{filepath.Join(d, "threads"), "8", "1000000"} }, nil, false},
		{"sqlite3", "sqlite3 building a 200,000-row table in memory",
			func(d string) []string { return []string{"sqlite3", ":memory:", sql} }, nil, false},
		{"jq", "jq filtering a 200,000-object JSON file",
			func(d string) []string {
				return []string{"jq", "-c", `[.[] | select(.id % 7 == 0) | {id, name: (.name | ascii_upcase), n: (.tags | length)}] | length`,
					filepath.Join(d, "objects.json")}
			}, nil, false},
		{"deep", "the unwinder's worst case: 400,000 events (a free and a malloc) alternating between the bottoms of two recursions 300 calls deep (305 frames), each stack unwound whole",
			func(d string) []string { return []string{filepath.Join(d, "deep"), "300", "100000"} }, nil, false},
		{"calls", "naive Fibonacci built with -finstrument-functions: 66M function calls (132M entries and returns), one allocation (gcc drops its malloc-free pairs)",
			func(d string) []string { return []string{filepath.Join(d, "calls"), "35"} }, nil, false},
		{"python3", "python3 (PYTHONMALLOC=malloc) building 200,000 dicts and a JSON text of them",
			func(d string) []string {
				return []string{pythonPath(), "-c", "import json; d = [{'id': i, 'name': 'item %d' % i} for i in range(200000)]; " +
					"s = json.dumps(d); print(len(json.loads(s)))"}
			}, []string{"PYTHONMALLOC=malloc"}, false},
		{"bigheap", fmt.Sprintf("a big heap: %s blocks of 16-64 bytes, every other one freed, %s live at exit (-bigheap-blocks)", report.Count(uint64(bigheapBlocks)), report.Count(uint64(bigheapBlocks/2))),
			func(d string) []string { return []string{filepath.Join(d, "bigheap"), fmt.Sprint(bigheapBlocks)} }, nil, true},
	}
}

// bigheapBlocks is how many blocks the bigheap workload allocates.
var bigheapBlocks int64 = 10000000

// scaleBlocks is how many it allocates in the scale run: 100M makes a
// 4-6 GiB heap with 50M blocks live at exit, issue 20's scale.
var scaleBlocks int64 = 100000000

// chosen returns the workloads that -only names (all if it is empty).
func chosen(dir, only string) []workload {
	var list []workload
	for _, w := range workloads(dir) {
		if (only == "" && !w.optIn) || contains(strings.Split(only, ","), w.name) {
			list = append(list, w)
		}
	}
	return list
}

// pythonPath returns the python3 interpreter itself: python3 in PATH may
// be a launcher script (pyenv's shims are), which would measure the
// launcher's processes too.
func pythonPath() string {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if p := strings.TrimSpace(string(out)); err == nil && p != "" {
		return p
	}
	return "python3"
}

// writeObjects writes the JSON file the jq workload filters.
func writeObjects(path string) error {
	var b strings.Builder
	b.WriteString("[")
	for i := range 200000 {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"object %d","tags":["t%d","u%d"],"score":%d.%d}`, i, i, i%13, i%29, i%1000, i%10)
	}
	b.WriteString("]\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// tool runs a workload under a profiler (or none).
type tool struct {
	name string
	// The command line, or nil if the tool cannot run this workload;
	// out is a path prefix for the trace.
	cmd  func(w []string, out string) []string
	file func(out string) string // the trace it wrote
	env  []string
	// ownBuild: the command runs a build of the workload of the tool's
	// own (line[0]), not the workload's program.
	ownBuild bool
}

// toolNames are the tools -tools chooses from, in the table's order.
var toolNames = []string{"native", "heaptrack", "memtrail", "lsan"}

// Names of the LeakSanitizer rows: the scan's time is the difference of
// their medians.
const (
	lsanOn  = "LSan, detect_leaks=1"
	lsanOff = "LSan, detect_leaks=0"
)

// compiled are the workloads bench builds from bench/workloads with the
// same flags, and so can build again with -fsanitize=leak.
var compiled = []string{"dense", "crossfree", "threads", "deep", "bigheap"}

// lsanSuffix names a workload's build with -fsanitize=leak beside its own.
const lsanSuffix = "-lsan"

// lsanOptions runs a program built with -fsanitize=leak with its scan at
// exit on or off. exitcode=0: a leak it finds is no failure of the run;
// symbolize=0: its report's stacks stay addresses, as memtrail's scan
// symbolizes nothing either.
func lsanOptions(detect bool) string {
	on := 0
	if detect {
		on = 1
	}
	return fmt.Sprintf("LSAN_OPTIONS=detect_leaks=%d:exitcode=0:symbolize=0", on)
}

// lsanArgs returns the command line of w's build with -fsanitize=leak, or
// nil if w is not one bench compiled or that build is missing.
func lsanArgs(w []string) []string {
	if !contains(compiled, filepath.Base(w[0])) {
		return nil
	}
	if _, err := os.Stat(w[0] + lsanSuffix); err != nil {
		return nil
	}
	return append([]string{w[0] + lsanSuffix}, w[1:]...)
}

// tools returns the tools named in chosen (all of toolNames if empty)
// but LSan, which lsanTools gives.
func tools(memtrail string, chosen []string) []tool {
	all := []tool{
		{name: "native", cmd: func(w []string, out string) []string { return w }},
		{name: "heaptrack", cmd: func(w []string, out string) []string { return append([]string{"heaptrack", "-o", out}, w...) },
			file: func(out string) string { return out + ".zst" }},
		{name: "memtrail", cmd: func(w []string, out string) []string {
			return append([]string{memtrail, "run", "-q", "-stats", "-o", out + ".mtr", "--"}, w...)
		}, file: func(out string) string { return out + ".mtr" }},
	}
	var ts []tool
	for _, t := range all {
		if len(chosen) == 0 || contains(chosen, t.name) {
			ts = append(ts, t)
		}
	}
	return ts
}

// lsanTools returns LeakSanitizer's two rows, the scan on and off, unless
// chosen (-tools) leaves LSan out.
func lsanTools(chosen []string) []tool {
	if len(chosen) > 0 && !contains(chosen, "lsan") {
		return nil
	}
	return []tool{
		{name: lsanOn, cmd: func(w []string, out string) []string { return lsanArgs(w) }, env: []string{lsanOptions(true)}, ownBuild: true},
		{name: lsanOff, cmd: func(w []string, out string) []string { return lsanArgs(w) }, env: []string{lsanOptions(false)}, ownBuild: true},
	}
}

// parseTools reads -tools: names from toolNames, native among them (the
// base of the ratios).
func parseTools(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	names := strings.Split(s, ",")
	for _, n := range names {
		if !contains(toolNames, n) {
			return nil, fmt.Errorf("-tools: no tool %q (there are %s)", n, strings.Join(toolNames, ", "))
		}
	}
	if !contains(names, "native") {
		return nil, fmt.Errorf("-tools %s: native must be one, the base of the ratios", s)
	}
	return names, nil
}

// lsanScan is LeakSanitizer's scan at exit: the median CPU time of the
// program with the scan less that without it, or 0 if the difference is
// lost in the noise (not positive). CPU, not wall: the scan is one
// thread's work while the program waits, so on an idle machine the two
// are the same, and on a shared one the wall times of runs of a few
// seconds differ by more than the scan.
func lsanScan(on, off sample) time.Duration {
	return max(on.cpu-off.cpu, 0)
}

// scanCell writes the leak scan column of a row: memtrail's scan, and its
// ratio to LSan's when bench measured LSan on the workload.
func scanCell(scan, lsan time.Duration) string {
	if scan <= 0 {
		return "—"
	}
	if lsan <= 0 {
		return ms(scan)
	}
	return fmt.Sprintf("%s, %.2f× LSan's", ms(scan), ratio(scan, lsan))
}

// sample is one measured run.
type sample struct {
	wall, cpu time.Duration
	rssKiB    int64
	// The peak RSS of the tool's own process (the one bench started):
	// for memtrail, the recorder with its live set.
	toolRSSKiB int64
	bytes      int64
	// For memtrail, from its -stats line: how often and how long the
	// program's threads waited for the recorder to read their rings.
	waits    int64
	waitTime time.Duration
	// How long memtrail's leak scan held the program at its exit, from
	// the report of the trace (0 without a scan).
	leakScan time.Duration
}

// leakScanTime reads how long the leak scan held the program from the
// report of trace.
func leakScanTime(memtrail, trace string) (time.Duration, error) {
	out, err := exec.Command(memtrail, "report", "-json", "-cache=false", trace).Output()
	if err != nil {
		return 0, fmt.Errorf("memtrail report %s: %w", trace, err)
	}
	scan, err := leakScanOf(out)
	if err != nil {
		return 0, fmt.Errorf("memtrail report -json %s: %w", trace, err)
	}
	return scan, nil
}

func main() {
	runs := flag.Int("runs", 5, "runs of each workload under each tool")
	only := flag.String("only", "", "comma-separated workloads to run (default all)")
	reading := flag.Bool("analysis", false, "measure how fast traces are read (memtrail report against heaptrack_print) rather than recorded")
	webUI := flag.Bool("web", false, "measure memtrail view's answers on big traces (the dense loop's 50M events, python3; bigheap's, with no analysis cache, when -only names it)")
	pgo := flag.Bool("pgo", false, "profile memtrail recording and reading the workloads ("+pgoWorkloads+" unless -only), and write the profile to "+pgoProfile)
	scale := flag.Bool("scale", false, "the scale run: each step of memtrail once on bigheap with -scale-blocks blocks (record, report, view; no heaptrack)")
	all := flag.Bool("all", false, "every measurement docs/performance.md quotes, in one run: recording (bigheap included), reading, the web (bigheap's trace too) and the scale run; -only narrows it")
	flag.Int64Var(&scaleBlocks, "scale-blocks", scaleBlocks, "blocks the bigheap workload allocates in the scale run (half stay live)")
	flag.StringVar(&baseline, "baseline", "", "also record with memtrail as of this git revision, to measure a change against it")
	flag.Func("also", "also record with memtrail run and these `flags` (e.g. -stack-calls, -leak-check=false), separated by commas; may be repeated", func(s string) error {
		also = append(also, strings.Split(s, ","))
		return nil
	})
	flag.Func("tools", "record only with these `tools`, separated by commas: "+strings.Join(toolNames, ", ")+" (default all; native must be one)", func(s string) error {
		var err error
		chosenTools, err = parseTools(s)
		return err
	})
	flag.Int64Var(&bigheapBlocks, "bigheap-blocks", bigheapBlocks, "blocks the bigheap workload allocates (half stay live); bigheap runs only when -only names it")
	flag.Parse()
	m := modes{reading: *reading, pgo: *pgo, web: *webUI, scale: *scale, all: *all}
	if err := run(*runs, *only, m); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// modes are the measurements a run of bench makes: recording unless one
// of the others is asked for, or all but the profile with -all.
type modes struct {
	reading, pgo, web, scale, all bool
}

func run(runs int, only string, m modes) error {
	if runs < 1 {
		return fmt.Errorf("-runs %d: need at least one run", runs)
	}
	// The program holds an array of them, 8 bytes each: a bound keeps a
	// typo from asking for more memory than the machine has.
	for _, b := range []struct {
		flag   string
		blocks int64
	}{{"-bigheap-blocks", bigheapBlocks}, {"-scale-blocks", scaleBlocks}} {
		if b.blocks < 2 || b.blocks > 1<<30 {
			return fmt.Errorf("%s %d: need 2 to %d", b.flag, b.blocks, 1<<30)
		}
	}
	if m.all && (m.reading || m.pgo || m.web || m.scale) {
		return fmt.Errorf("-all makes every measurement but -pgo's: it takes no -analysis, -web, -scale or -pgo")
	}
	if m.scale && only != "" && only != "bigheap" {
		return fmt.Errorf("-scale runs bigheap alone, not -only %s", only)
	}
	if m.all && only == "" {
		// Every workload, bigheap too: -all is the whole page of figures.
		var names []string
		for _, w := range workloads("") {
			names = append(names, w.name)
		}
		only = strings.Join(append(names, "unwind"), ",")
	}
	if only != "" {
		known := []string{"unwind"}
		for _, w := range workloads("") {
			known = append(known, w.name)
		}
		for _, name := range strings.Split(only, ",") {
			if !contains(known, name) {
				return fmt.Errorf("-only: no workload %q (there are %s)", name, strings.Join(known, ", "))
			}
		}
	}
	if m.web {
		// Refused before the builds: the web benchmark has traces of
		// fewer workloads than -only knows.
		if _, err := webTraces("", only); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "memtrail-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	memtrail, err := build(dir)
	if err != nil {
		return err
	}
	if m.pgo {
		return writePGO(memtrail, dir, runs, only)
	}
	switch {
	case m.scale:
		fmt.Printf("Measured %s on %s (%d CPUs).\n", time.Now().Format("2006-01-02"), hostDesc(), runtime.NumCPU())
		return scaleBench(memtrail, dir)
	case m.web:
		fmt.Printf("Measured %s on %s (%d CPUs).\n", time.Now().Format("2006-01-02"), hostDesc(), runtime.NumCPU())
		return webBench(memtrail, dir, runs, only)
	case m.reading:
		fmt.Printf("Measured %s on %s (%d CPUs).\n", time.Now().Format("2006-01-02"), hostDesc(), runtime.NumCPU())
		return analysisBench(memtrail, dir, runs, only)
	}
	if err := recordBench(memtrail, dir, runs, only); err != nil {
		return err
	}
	if !m.all {
		return nil
	}
	names := strings.Split(only, ",")
	if err := analysisBench(memtrail, dir, runs, only); err != nil {
		return err
	}
	var web []string
	for _, tr := range allWebTraces(dir) {
		if contains(names, tr.workload) {
			web = append(web, tr.workload)
		}
	}
	if len(web) > 0 {
		fmt.Println()
		if err := webBench(memtrail, dir, runs, strings.Join(web, ",")); err != nil {
			return err
		}
	}
	if contains(names, "bigheap") {
		return scaleBench(memtrail, dir)
	}
	return nil
}

// recordBench measures recording: each workload -only names under each
// tool, runs times, with the medians in one table.
func recordBench(memtrail, dir string, runs int, only string) error {
	ts := tools(memtrail, chosenTools)
	if baseline != "" {
		old, err := buildRevision(dir, baseline)
		if err != nil {
			return err
		}
		ts = append(ts, tool{name: "memtrail " + baseline, cmd: func(w []string, out string) []string {
			return append([]string{old, "run", "-q", "-stats", "-o", out + ".mtr", "--"}, w...)
		}, file: func(out string) string { return out + ".mtr" }})
	}
	for _, flags := range also {
		ts = append(ts, tool{name: "memtrail " + strings.Join(flags, " "), cmd: func(w []string, out string) []string {
			args := append([]string{memtrail, "run", "-q", "-stats"}, flags...)
			return append(append(args, "-o", out+".mtr", "--"), w...)
		}, file: func(out string) string { return out + ".mtr" }})
	}
	ts = append(ts, lsanTools(chosenTools)...)
	fmt.Printf("Measured %s on %s (%d CPUs), %d runs each, medians.\n\n", time.Now().Format("2006-01-02"), hostDesc(), runtime.NumCPU(), runs)
	fmt.Println("| workload | tool | wall | ×native | extra wall time ÷ heaptrack's | CPU | ×native | peak RSS of the program | memtrail's own peak RSS | leak scan at exit (program held) | trace bytes/event | program waited for the recorder |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, w := range chosen(dir, only) {
		args := w.args(dir)
		events, err := countEvents(memtrail, args, w.env, dir)
		if err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		results := make([][]sample, len(ts))
		for r := 0; r < runs; r++ {
			for i, t := range ts {
				if t.cmd(args, "") == nil {
					continue
				}
				s, err := measure(t, args, w.env, dir)
				if err != nil {
					return fmt.Errorf("%s under %s: %w", w.name, t.name, err)
				}
				results[i] = append(results[i], s)
			}
		}
		medians := map[string]sample{}
		for i, t := range ts {
			if len(results[i]) > 0 {
				medians[t.name] = median(results[i])
			}
		}
		var lsan time.Duration
		on, okOn := medians[lsanOn]
		off, okOff := medians[lsanOff]
		if okOn && okOff {
			lsan = lsanScan(on, off)
		}
		base := medians["native"]
		for i, t := range ts {
			if len(results[i]) == 0 {
				continue
			}
			m := medians[t.name]
			perEvent, waited, own, scan, extra := "—", "—", "—", "—", "—"
			if t.file != nil && events > 0 {
				perEvent = fmt.Sprintf("%.3g", float64(m.bytes)/float64(events))
			}
			if strings.HasPrefix(t.name, "memtrail") {
				waited = fmt.Sprintf("%d times, %.3f s", m.waits, m.waitTime.Seconds())
				own = fmt.Sprintf("%.1f MiB", float64(m.toolRSSKiB)/1024)
				scan = scanCell(m.leakScan, lsan)
				if ht, ok := medians["heaptrack"]; ok {
					extra = extraCell(m.wall, ht.wall, base.wall)
				}
			}
			if t.name == lsanOn && okOff {
				scan = fmt.Sprintf("%s (LSan's; of the wall times: %s)", ms(lsan), ms(on.wall-off.wall))
			}
			fmt.Printf("| %s | %s | %.2f s | %.1f | %s | %.2f s | %.1f | %.1f MiB | %s | %s | %s | %s |\n", w.name, t.name,
				m.wall.Seconds(), ratio(m.wall, base.wall), extra, m.cpu.Seconds(), ratio(m.cpu, base.cpu),
				float64(m.rssKiB)/1024, own, scan, perEvent, waited)
		}
	}
	fmt.Println()
	fmt.Println(scanLegend())
	fmt.Println()
	for _, w := range workloads(dir) {
		fmt.Printf("- %s: %s\n", w.name, w.about)
	}
	if only == "" || contains(strings.Split(only, ","), "unwind") {
		return unwindCosts(memtrail, dir, runs)
	}
	return nil
}

// unwindCosts prices a call stack per event: glibc's backtrace and
// libunwind's unw_backtrace called before every malloc and free of the
// dense loop, against memtrail's whole agent (stack, order, time, record)
// measured as the program's extra CPU time under memtrail run.
func unwindCosts(memtrail, dir string, runs int) error {
	const n = 4000000
	events := float64(2 * n)
	prog := filepath.Join(dir, "unwindcost")
	cpu := func(args ...string) (time.Duration, error) {
		var ss []sample
		for r := 0; r < runs; r++ {
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				return 0, fmt.Errorf("%v: %v\n%s", args, err, out)
			}
			s := sample{cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
			if i := strings.Index(string(out), "program CPU "); i >= 0 {
				var secs float64
				fmt.Sscan(string(out[i+len("program CPU "):]), &secs)
				s.cpu = time.Duration(secs * float64(time.Second))
			}
			ss = append(ss, s)
		}
		return median(ss).cpu, nil
	}
	native, err := cpu(prog, "none", fmt.Sprint(n))
	if err != nil {
		return err
	}
	fmt.Printf("\nCost of a call stack per malloc or free on the dense loop (%d events, CPU time over native, median of %d):\n\n", int(events), runs)
	fmt.Println("| unwinder | ns per event |")
	fmt.Println("|---|---|")
	for _, m := range []string{"backtrace", "libunwind"} {
		t, err := cpu(prog, m, fmt.Sprint(n))
		if err != nil {
			fmt.Printf("| %s | not available (%v) |\n", m, err)
			continue
		}
		fmt.Printf("| %s | %.0f |\n", map[string]string{"backtrace": "glibc backtrace (_Unwind_Backtrace)", "libunwind": "libunwind unw_backtrace, global cache"}[m],
			float64(t-native)/events)
	}
	// A ring big enough for the whole run: the program never waits for
	// memtrail, so its extra CPU time is the agent's own work.
	t, err := cpu(memtrail, "run", "-q", "-stats", "-ring-size", "512MiB", "-o", filepath.Join(dir, "u.mtr"), "--", prog, "none", fmt.Sprint(n))
	if err != nil {
		return err
	}
	fmt.Printf("| memtrail's agent, everything per event (stack, sequence number, time, record) | %.0f |\n", float64(t-native)/events)
	return nil
}

// baseline is the git revision of memtrail to measure against, if any.
var baseline string

// also is the flags of memtrail run to measure as more tools, one each.
var also [][]string

// chosenTools are the tools -tools names (nil: all).
var chosenTools []string

// extraCell is a memtrail run's time over native as a fraction of
// heaptrack's, issue 20's measure of recording cost: the medians of the
// same run, so the machine's load weighs on both alike.
func extraCell(memtrail, heaptrack, native time.Duration) string {
	if heaptrack <= native {
		return "— (heaptrack no slower than native)"
	}
	return fmt.Sprintf("%.2f", float64(memtrail-native)/float64(heaptrack-native))
}

// scanLegend says what the leak scan column holds.
func scanLegend() string {
	return `"leak scan at exit" is, for memtrail, the leak_scan_ns of the trace's ` + "`memtrail report -json`" +
		` (how long the scan held the program at its exit), and its ratio to LeakSanitizer's scan (at most 1: as fast as LSan). ` +
		`LSan's scan is the difference of two medians: the CPU time (the scan is one thread's work while the program waits; the difference of the wall times, beside it, is as good only on an idle machine) of the workload built with -fsanitize=leak (gcc) and run with ` +
		"`" + lsanOptions(true) + "`" + ` less that with detect_leaks=0, the allocator's own cost the same in both; 0 when the difference is lost in the noise. ` +
		`LSan runs only the workloads bench compiles (` + strings.Join(compiled, ", ") + `).`
}

// buildRevision builds memtrail as of git revision rev into dir.
func buildRevision(dir, rev string) (string, error) {
	src := filepath.Join(dir, "baseline-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("git", "archive", rev)
	extract := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	extract.Stdin = pipe
	if err := extract.Start(); err != nil {
		return "", err
	}
	var stderr strings.Builder
	archive.Stderr = &stderr
	if err := archive.Run(); err != nil {
		return "", fmt.Errorf("git archive %s: %v\n%s", rev, err, stderr.String())
	}
	if err := extract.Wait(); err != nil {
		return "", fmt.Errorf("extracting %s: %w", rev, err)
	}
	bin := filepath.Join(dir, "memtrail-baseline")
	build := exec.Command("go", "build", "-o", bin, "./cmd/memtrail")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building memtrail %s: %v\n%s", rev, err, out)
	}
	return bin, nil
}

// build compiles memtrail and the workload programs into dir.
func build(dir string) (string, error) {
	memtrail := filepath.Join(dir, "memtrail")
	if out, err := exec.Command("go", "build", "-o", memtrail, "./cmd/memtrail").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building memtrail: %v\n%s", err, out)
	}
	if err := writeObjects(filepath.Join(dir, "objects.json")); err != nil {
		return "", err
	}
	for _, w := range compiled {
		src := filepath.Join("bench", "workloads", w+".c")
		out, err := exec.Command("cc", "-O2", "-g", "-o", filepath.Join(dir, w), src, "-lpthread").CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("building %s: %v\n%s", w, err, out)
		}
		// LeakSanitizer is gcc's (liblsan0, which gcc's libgcc-dev
		// brings); without it the table has no LSan rows, and says why
		// on stderr.
		out, err = exec.Command("gcc", "-O2", "-g", "-fsanitize=leak", "-o", filepath.Join(dir, w+lsanSuffix), src, "-lpthread").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: no LSan rows for %s: building it with -fsanitize=leak: %v\n%s", w, err, out)
		}
	}
	calls := filepath.Join("bench", "workloads", "calls.c")
	if out, err := exec.Command("cc", "-O2", "-g", "-finstrument-functions", "-o", filepath.Join(dir, "calls"), calls).CombinedOutput(); err != nil {
		return "", fmt.Errorf("building calls: %v\n%s", err, out)
	}
	// libunwind is optional: without its headers the comparison says so.
	src := filepath.Join("bench", "workloads", "unwindcost.c")
	args := []string{"-O2", "-g", "-DHAVE_LIBUNWIND", "-I/usr/include/x86_64-linux-gnu", "-o", filepath.Join(dir, "unwindcost"), src, "-lunwind"}
	if _, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
		if out, err := exec.Command("cc", "-O2", "-g", "-o", filepath.Join(dir, "unwindcost"), src).CombinedOutput(); err != nil {
			return "", fmt.Errorf("building unwindcost: %v\n%s", err, out)
		}
	}
	return memtrail, nil
}

// measure runs args under t once.
func measure(t tool, args, env []string, dir string) (sample, error) {
	out := filepath.Join(dir, "trace")
	for _, f := range []string{out + ".zst", out + ".mtr"} {
		os.Remove(f)
	}
	line := t.cmd(args, out)
	cmd := exec.Command(line[0], line[1:]...)
	cmd.Env = append(append(os.Environ(), env...), t.env...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	program := args[0]
	if t.ownBuild {
		program = line[0]
	}
	s, err := runPolled(cmd, program)
	if err != nil {
		return s, err
	}
	s.waits, s.waitTime = parseWaits(stderr.String())
	if t.file != nil {
		fi, err := os.Stat(t.file(out))
		if err != nil {
			return s, fmt.Errorf("no trace: %w", err)
		}
		s.bytes = fi.Size()
	}
	if strings.HasPrefix(t.name, "memtrail") {
		if s.leakScan, err = leakScanTime(line[0], t.file(out)); err != nil {
			return s, err
		}
	}
	return s, nil
}

// runPolled runs cmd, and returns its wall and CPU time and the peak RSS
// of its process running exe (the workload, under a tool that starts it).
// The peak RSS is polled from /proc: the rusage of a child started by a Go
// program counts the parent's memory, which the child had until it ran
// exec.
func runPolled(cmd *exec.Cmd, exe string) (sample, error) {
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return sample{}, err
	}
	peak := make(chan [2]int64)
	stop := make(chan struct{})
	go func() {
		program, tool := pollPeakRSS(exe, cmd.Process.Pid, stop)
		peak <- [2]int64{program, tool}
	}()
	err := cmd.Wait()
	s := sample{wall: time.Since(start)}
	close(stop)
	peaks := <-peak
	s.rssKiB, s.toolRSSKiB = peaks[0], peaks[1]
	if err != nil {
		return s, err
	}
	s.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return s, nil
}

// countEvents records the workload once and counts its events (allocations
// plus frees), the denominator of bytes per event for every tool.
func countEvents(memtrail string, args, env []string, dir string) (int64, error) {
	out := filepath.Join(dir, "count.mtr")
	cmd := exec.Command(memtrail, append([]string{"run", "-q", "-o", out, "--"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("%v: %s", err, b)
	}
	rep, err := exec.Command(memtrail, "report", "-json", out).Output()
	if err != nil {
		return 0, err
	}
	var allocs, frees int64
	for _, key := range []string{`"allocations":`, `"frees":`} {
		i := strings.Index(string(rep), key)
		if i < 0 {
			return 0, fmt.Errorf("report has no %s", key)
		}
		var v int64
		fmt.Sscan(string(rep[i+len(key):]), &v)
		if key == `"allocations":` {
			allocs = v
		} else {
			frees = v
		}
	}
	return allocs + frees, nil
}

// pollPeakRSS watches the process tree under root for the workload's own
// process (the one running exe) and returns the highest VmHWM seen, and
// root's own.
func pollPeakRSS(exe string, root int, stop <-chan struct{}) (program, tool int64) {
	var peak int64
	want, _ := exec.LookPath(exe)
	want, _ = filepath.EvalSymlinks(want)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, pid := range descendants(root) {
			if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); target == want {
				peak = max(peak, hwm(pid))
			}
		}
		tool = max(tool, hwm(root))
		select {
		case <-stop:
			return peak, tool
		case <-tick.C:
		}
	}
}

// descendants returns root and the processes under it, found through the
// children lists of its threads: a handful of reads, where going through
// all of /proc every few milliseconds took enough CPU to slow the
// workloads down.
func descendants(root int) []int {
	out := []int{root}
	todo := []int{root}
	for len(todo) > 0 {
		pid := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, t := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
			for _, f := range strings.Fields(string(b)) {
				var child int
				if _, err := fmt.Sscan(f, &child); err == nil {
					out = append(out, child)
					todo = append(todo, child)
				}
			}
		}
	}
	return out
}

func hwm(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			var kib int64
			fmt.Sscan(strings.TrimPrefix(line, "VmHWM:"), &kib)
			return kib
		}
	}
	return 0
}

// waitsLine matches the end of memtrail's -stats line. Its count may be
// "1 time" or have thousands separators ("1,413 times"), as report.Plural
// writes it; a baseline revision may write it plain ("1413 times").
var waitsLine = regexp.MustCompile(`the program waited for memtrail ([0-9,]+) times?, ([0-9.]+) s`)

// parseWaits returns how many times, and how long, the program waited for
// memtrail, from the -stats line in stderr (0, 0 without one).
func parseWaits(stderr string) (int64, time.Duration) {
	m := waitsLine.FindStringSubmatch(stderr)
	if m == nil {
		return 0, 0
	}
	n, _ := strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
	sec, _ := strconv.ParseFloat(m[2], 64)
	return n, time.Duration(sec * float64(time.Second))
}

func median(ss []sample) sample {
	pick := func(get func(sample) int64) int64 {
		v := make([]int64, len(ss))
		for i, s := range ss {
			v[i] = get(s)
		}
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		return v[len(v)/2]
	}
	return sample{
		wall:       time.Duration(pick(func(s sample) int64 { return int64(s.wall) })),
		cpu:        time.Duration(pick(func(s sample) int64 { return int64(s.cpu) })),
		rssKiB:     pick(func(s sample) int64 { return s.rssKiB }),
		toolRSSKiB: pick(func(s sample) int64 { return s.toolRSSKiB }),
		bytes:      pick(func(s sample) int64 { return s.bytes }),
		waits:      pick(func(s sample) int64 { return s.waits }),
		waitTime:   time.Duration(pick(func(s sample) int64 { return int64(s.waitTime) })),
		leakScan:   time.Duration(pick(func(s sample) int64 { return int64(s.leakScan) })),
	}
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func hostDesc() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "model name") {
			if i := strings.IndexByte(line, ':'); i >= 0 {
				return strings.TrimSpace(line[i+1:])
			}
		}
	}
	return runtime.GOARCH
}
