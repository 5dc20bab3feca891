package web_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/demo"
	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/record"
	"github.com/memtrail/memtrail/internal/report"
	"github.com/memtrail/memtrail/internal/web"
)

var screenshots = flag.String("screenshots", "", "write a screenshot of every view into this directory (for docs/)")

// recorded is a program recorded once for all the tests.
type recorded struct {
	once  sync.Once
	trace string
	err   error
	// stackCalls records the program's every function entry and return
	// (memtrail run -stack-calls), leakScan its leak classes at exit
	// (memtrail run, unless -leak-check=false), leakOrigins where each
	// leak was made (memtrail run -leak-origins).
	stackCalls, leakScan, leakOrigins bool
	// timeUnit is the trace's time unit (default: memtrail run's).
	timeUnit time.Duration
}

var widgets, boxes recorded

// record records args into dir once.
func (r *recorded) record(t *testing.T, args func(dir string) ([]string, error)) string {
	t.Helper()
	r.once.Do(func() {
		dir, err := os.MkdirTemp("", "memtrail-web-test-")
		if err != nil {
			r.err = err
			return
		}
		argv, err := args(dir)
		if err != nil {
			r.err = err
			return
		}
		devNull, err := os.Open(os.DevNull)
		if err != nil {
			r.err = err
			return
		}
		defer devNull.Close()
		var log strings.Builder
		res, err := record.Run(record.Options{Args: argv, Output: filepath.Join(dir, "trace.mtr"),
			AgentPath: fixture.Agent(t), Stdin: devNull, Log: &log, Version: "test", StackCalls: r.stackCalls, LeakScan: r.leakScan || r.leakOrigins, LeakOrigins: r.leakOrigins, TimeUnit: r.timeUnit})
		switch {
		case err != nil:
			r.err = fmt.Errorf("recording %v: %v\n%s", argv, err, log.String())
		case res.WriteErr != nil:
			r.err = fmt.Errorf("recording %v: %v", argv, res.WriteErr)
		default:
			r.trace = res.Path
		}
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.trace
}

// widgetTrace records the mprof widget example: its red widgets leak.
func widgetTrace(t *testing.T) string {
	return widgets.record(t, func(dir string) ([]string, error) {
		prog, err := demo.Build(dir)
		return []string{prog}, err
	})
}

// boxesTrace records testdata/boxes.cc, whose functions are templates.
func boxesTrace(t *testing.T) string {
	prog := fixture.Build(t, "testdata/boxes.cc")
	return boxes.record(t, func(string) ([]string, error) { return []string{prog}, nil })
}

// serve starts a server of trace, closed when the test ends.
func serve(t *testing.T, trace string) *viewer {
	t.Helper()
	s, err := web.New(trace)
	if err != nil {
		t.Fatal(err)
	}
	return serveServer(t, s)
}

// viewer is a server of a trace, as its user reaches it: with its token.
type viewer struct {
	*httptest.Server
	token string
}

// serveServer serves s, until the test ends.
func serveServer(t *testing.T, s *web.Server) *viewer {
	t.Helper()
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return &viewer{ts, s.Token()}
}

// page is the address memtrail view prints: the UI, with the token.
func (v *viewer) page() string { return v.URL + "/?token=" + v.token }

// get asks for path (/api/...) with the token.
func (v *viewer) get(t *testing.T, path string) *http.Response {
	t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	resp, err := http.Get(v.URL + path + sep + "token=" + v.token)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// browser starts a headless Chromium for the test, which fails at the
// first uncaught exception or console error of the page.
func browser(t *testing.T) context.Context {
	t.Helper()
	exe := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		t.Fatal("no Chromium: the browser tests need Debian's chromium package (.ci/run installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(1400, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	var mu sync.Mutex
	var problems []string
	listen := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			problems = append(problems, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, msg))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var args []string
				for _, a := range ev.Args {
					args = append(args, a.Description+string(a.Value))
				}
				problems = append(problems, "console error: "+strings.Join(args, " "))
			}
		}
	}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(listen))
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("starting %s: %v", exe, err)
	}
	t.Cleanup(func() {
		mu.Lock()
		p := problems
		mu.Unlock()
		for _, msg := range p {
			t.Errorf("the page: %s", msg)
		}
		cancel()
		cancelAlloc()
	})
	return ctx
}

// do runs browser actions, failing the test on error.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval returns the value of a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it holds.
func waitFor(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := chromedp.Run(tctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ""`))
		t.Fatalf("waiting for %s (%s): %v\nthe page says:\n%s", what, cond, err, state)
	}
}

// hasText waits until the first element matching sel says want, and
// fails the test with what it says if it never does.
func hasText(t *testing.T, ctx context.Context, what, sel, want string) {
	t.Helper()
	q := fmt.Sprintf(`document.querySelector(%q)`, sel)
	tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cond := fmt.Sprintf(`%s !== null && %s.textContent.includes(%q)`, q, q, want)
	if _, err := chromedp.Run(tctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(`+q+` || {textContent: "(no such element)"}).textContent`))
		t.Errorf("%s says %q, want %q in it", what, got, want)
	}
}

// tab shows a tab of the UI.
func tab(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	do(t, ctx, "showing the "+name+" tab", chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-tab=%q]`, name))))
	waitFor(t, ctx, "the "+name+" tab", fmt.Sprintf(`document.querySelector("#tab-%s").classList.contains("active")`, name))
}

// shot writes a screenshot of the page, if -screenshots asks for them.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if *screenshots == "" {
		return
	}
	do(t, ctx, "waiting for the page to settle", chromedp.Sleep(300*time.Millisecond))
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*screenshots, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// openUI serves the UI of trace and opens it in a browser.
func openUI(t *testing.T, trace string) context.Context {
	t.Helper()
	ts := serve(t, trace)
	ctx := browser(t)
	do(t, ctx, "opening the UI", chromedp.Navigate(ts.page()))
	return ctx
}

// model analyzes a trace, as the server does.
func model(t *testing.T, trace string) *analysis.Process {
	t.Helper()
	m, _, err := analysis.AnalyzeFile(trace, analysis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m.Processes[0]
}

// TestNumbersAsReport checks that the UI writes sizes and durations as
// memtrail report does, halfway values too (53.25 KiB is "53.2 KiB" in
// both: Go rounds a tie to even, JavaScript's toFixed up), so that a
// number seen in one can be found in the other.
func TestNumbersAsReport(t *testing.T) {
	ctx := openUI(t, widgetTrace(t))
	for _, n := range []uint64{54528, 2176, 10496, 1 << 20, 1<<20 + 1<<17 + 1<<15, 999, 123456789} {
		if got, want := eval[string](t, ctx, fmt.Sprintf("memtrailFormat.size(%d)", n)), report.Size(n); strings.Replace(got, " B", " bytes", 1) != want {
			t.Errorf("fmtSize(%d) = %q, report.Size = %q", n, got, want)
		}
	}
	for _, ns := range []uint64{12_250_000, 1_125_000, 2_500, 7_250, 12_345_000, 3_500_000_000, 150_000_000_000} {
		if got, want := eval[string](t, ctx, fmt.Sprintf("memtrailFormat.duration(%d)", ns)), report.Duration(ns); got != want {
			t.Errorf("fmtDuration(%d) = %q, report.Duration = %q", ns, got, want)
		}
	}
}

// TestTimeline opens the UI on the widget program: the header gives its
// peak, the timeline marks it, and a click on the timeline shows what
// happened at that moment.
func TestTimeline(t *testing.T) {
	trace := widgetTrace(t)
	p := model(t, trace)
	ctx := openUI(t, trace)

	hasText(t, ctx, "the header's peak", "#summary-peak", report.Size(p.Summary.PeakBytes))
	hasText(t, ctx, "the header's in use at exit", "#summary-exit", report.Size(p.Summary.InUseAtExitBytes))
	tab(t, ctx, "timeline")
	waitFor(t, ctx, "the peak's marker", `document.querySelector("#timeline-peak-marker") !== null`)
	shot(t, ctx, "timeline")

	// Click in the middle of the chart: the detail of that step.
	box := eval[[]float64](t, ctx, `(() => { const r = document.querySelector("#timeline").getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()`)
	do(t, ctx, "clicking the timeline", chromedp.MouseClickXY(box[0]+box[2]/2, box[1]+box[3]/2))
	for _, want := range []string{"allocations", "frees"} {
		hasText(t, ctx, "the detail of a step of the timeline", "#timeline-detail", want)
	}

	// Click the step of the peak, where the last widget was made, in the
	// middle of its bar of allocations (the peak may fall at the very end
	// of its step, and the next step may have no events): that step's
	// events, each with its call stack.
	peakX := eval[float64](t, ctx, `(() => {
		const c = document.querySelector("#timeline-peak-marker circle").getBoundingClientRect();
		const px = c.x + c.width / 2;
		const bars = [...document.querySelectorAll("#timeline .alloc-bars rect")].map((r) => r.getBoundingClientRect());
		const bar = bars.find((b) => b.x <= px + 1 && px - 1 <= b.x + b.width) || bars[bars.length - 1];
		return bar.x + bar.width / 2;
	})()`)
	do(t, ctx, "clicking the timeline at the peak", chromedp.MouseClickXY(peakX, box[1]+box[3]/2))
	waitFor(t, ctx, "the events of the first step", `document.querySelectorAll("#timeline-events tr.event").length > 0`)
	hasText(t, ctx, "the first event", "#timeline-events tr.event", "alloc")
	// As many events as the step's allocations and frees.
	counts := eval[[]int](t, ctx, `(() => {
		const n = (s) => +s.replace(/[^0-9]/g, "");
		const kv = {};
		for (const d of document.querySelectorAll("#timeline-detail dl > div")) kv[d.querySelector("dt").textContent] = d.querySelector("dd").textContent;
		return [n(kv["allocations"]), n(kv["frees"]), n(document.querySelector("#timeline-events h3").textContent.split(" ")[0])];
	})()`)
	if counts[0]+counts[1] != counts[2] || counts[2] == 0 {
		t.Errorf("the step has %d allocations and %d frees, and lists %d events", counts[0], counts[1], counts[2])
	}
	do(t, ctx, "opening the first event's call stack", chromedp.Click(chromedp.CSS("#timeline-events tr.event")))
	waitFor(t, ctx, "its call stack", `[...document.querySelectorAll("#timeline-events tr.event-stack:not([hidden]) .fn")].some(e => e.textContent.startsWith("make_widget"))`)
	shot(t, ctx, "timeline-events")
}

// makeWidgetLink finds the link to the source of make_widget's frame in
// the leaks' call stacks.
const makeWidgetLink = `([...document.querySelectorAll("#leaks .stack-frame")].find(f => f.querySelector(".fn").textContent.startsWith("make_widget")) || {querySelector: () => undefined}).querySelector(".frame-link")`

// TestSource follows a frame of a leak to its source line.
func TestSource(t *testing.T) {
	trace := widgetTrace(t)
	ctx := openUI(t, trace)
	tab(t, ctx, "leaks")
	waitFor(t, ctx, "a frame of make_widget", makeWidgetLink+" !== undefined")
	shot(t, ctx, "leaks")

	file := eval[string](t, ctx, `(() => { const e = `+makeWidgetLink+`; e.click(); return e.dataset.file; })()`)
	line := eval[int](t, ctx, `+`+makeWidgetLink+`.dataset.line`)
	if filepath.Base(file) != "widget.c" || line <= 0 {
		t.Fatalf("make_widget's frame links to %s:%d, want a line of widget.c", file, line)
	}
	waitFor(t, ctx, "the source line", `document.querySelector("#source .highlight") !== null`)
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(string(src), "\n")[line-1]
	got := eval[string](t, ctx, `document.querySelector("#source .highlight").textContent`)
	if !strings.Contains(got, strings.TrimSpace(want)) {
		t.Errorf("the highlighted line is %q; want line %d of %s, %q", got, line, file, want)
	}
	hasText(t, ctx, "the source's title", "#source-title", fmt.Sprintf("widget.c:%d", line))
	shot(t, ctx, "source")
}

// TestFlameCost switches the flame graph's cost: at the peak both the red
// and the blue widgets are live; at exit only the red ones are.
func TestFlameCost(t *testing.T) {
	trace := widgetTrace(t)
	ctx := openUI(t, trace)
	tab(t, ctx, "flame")
	const has = `[...document.querySelectorAll("#flame .frame")].some(e => e.dataset.function === %q)`
	waitFor(t, ctx, "make_blue_widget at the peak", fmt.Sprintf(has, "make_blue_widget"))
	waitFor(t, ctx, "make_red_widget at the peak", fmt.Sprintf(has, "make_red_widget"))
	shot(t, ctx, "flame")

	do(t, ctx, "choosing the cost 'still in use at exit'", chromedp.SetValue(chromedp.CSS("#flame-cost"), "leaked"))
	eval[bool](t, ctx, `document.querySelector("#flame-cost").dispatchEvent(new Event("change"))`)
	waitFor(t, ctx, "make_blue_widget gone", "!"+fmt.Sprintf(has, "make_blue_widget"))
	waitFor(t, ctx, "make_red_widget still there", fmt.Sprintf(has, "make_red_widget"))

	do(t, ctx, "searching make_red", chromedp.SendKeys(chromedp.CSS("#flame-search"), "make_red"))
	waitFor(t, ctx, "the match", `[...document.querySelectorAll("#flame .frame.match")].every(e => e.dataset.function.includes("make_red")) && document.querySelectorAll("#flame .frame.match").length > 0`)

	do(t, ctx, "showing the sunburst", chromedp.Click(chromedp.CSS("#flame-sunburst")))
	waitFor(t, ctx, "an arc of make_red_widget", `[...document.querySelectorAll("#flame .arc")].some(e => e.dataset.function === "make_red_widget")`)
	shot(t, ctx, "sunburst")
}

// TestTemplateNames checks that C++ template names, full of < and >, are
// shown as they are, in the flame graph and the tables.
func TestTemplateNames(t *testing.T) {
	trace := boxesTrace(t)
	ctx := openUI(t, trace)
	tab(t, ctx, "flame")
	waitFor(t, ctx, "make_box<int>", `[...document.querySelectorAll("#flame .frame")].some(e => e.dataset.function.startsWith("Box<int>* make_box<int>") && e.textContent.includes("make_box<int>"))`)
	tab(t, ctx, "tables")
	waitFor(t, ctx, "make_box<int> in the table", `document.querySelector("#table-view") && document.querySelector("#table-view").textContent.includes("make_box<int>")`)
	// Nothing of a name became markup.
	tags := eval[[]string](t, ctx, `[...new Set([...document.querySelectorAll("body *")].map(e => e.localName))].filter(n => n === "int" || n === "pair")`)
	if len(tags) > 0 {
		t.Errorf("names became elements: %v", tags)
	}
	// In a page of report -html, the names are in the data as escapes:
	// nothing in them can end the element that holds them.
	page := htmlPage(t, trace)
	if n := strings.Count(page.String(), "</script>"); n != 2 || !strings.Contains(page.String(), `make_box\u003cint\u003e`) {
		t.Errorf("the page has %d </script> (want 2: the data's and the script's) and make_box<int> escaped %v",
			n, strings.Contains(page.String(), `make_box\u003cint\u003e`))
	}
	shot(t, ctx, "tables")
}

// TestSourceEndpoint checks that /api/source serves the files the trace
// names and nothing else.
func TestSourceEndpoint(t *testing.T) {
	trace := widgetTrace(t)
	ts := serve(t, trace)
	var widgetC string
	for f := range sourcesOf(t, trace) {
		if filepath.Base(f) == "widget.c" {
			widgetC = f
		}
	}
	if widgetC == "" {
		t.Fatal("no frame of the widget trace is in widget.c")
	}
	for _, c := range []struct {
		path   string
		status int
	}{
		{widgetC, http.StatusOK},
		{"/etc/passwd", http.StatusForbidden},
		{widgetC + "/../widget.c", http.StatusForbidden},
		{trace, http.StatusForbidden},
		{"", http.StatusForbidden},
	} {
		resp := ts.get(t, "/api/source?path="+url.QueryEscape(c.path))
		var body struct {
			Lines []string
			Error string
		}
		err := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != c.status {
			t.Errorf("source %q: status %d (%v), want %d", c.path, resp.StatusCode, err, c.status)
			continue
		}
		if c.status == http.StatusOK && !strings.Contains(strings.Join(body.Lines, "\n"), "make_red_widget") {
			t.Errorf("source %q: %d lines without make_red_widget", c.path, len(body.Lines))
		}
		if c.status != http.StatusOK && body.Error == "" {
			t.Errorf("source %q: status %d and no error message", c.path, resp.StatusCode)
		}
	}
}

// sourcesOf returns the files of the frames of a trace's call stacks.
func sourcesOf(t *testing.T, trace string) map[string]bool {
	p := model(t, trace)
	files := map[string]bool{}
	for i := range p.Sites {
		for _, f := range p.SiteStack(&p.Sites[i]) {
			files[f.File] = true
		}
	}
	return files
}

// TestEventsEndpoint asks for the events of the whole run and of a
// stretch of it: all are counted, the first 200 listed with their stacks.
func TestEventsEndpoint(t *testing.T) {
	trace := widgetTrace(t)
	p := model(t, trace)
	ts := serve(t, trace)
	get := func(query string) (int, map[string]any) {
		resp := ts.get(t, "/api/events?"+query)
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return resp.StatusCode, body
	}
	status, all := get(fmt.Sprintf("from=0&to=%d", p.RunTime()))
	if want := float64(p.Summary.Allocations + p.Summary.Frees); status != http.StatusOK || all["count"] != want {
		t.Errorf("the whole run: status %d, %v events; want the %v allocations and frees", status, all["count"], want)
	}
	events, _ := all["events"].([]any)
	if len(events) != 200 {
		t.Fatalf("the whole run lists %d events, want the first 200", len(events))
	}
	first := events[0].(map[string]any)
	stack, _ := json.Marshal(first["stack"])
	if first["kind"] != "alloc" || first["size"] != float64(204) || !strings.Contains(string(stack), `"make_widget"`) {
		t.Errorf("the first event is %v; want an allocation of a widget, 204 bytes from make_widget", first)
	}
	// The second half of the run has no allocation, only frees.
	// (Its first events may come before its start record: they count as
	// at its start.)
	peak := max(p.Summary.PeakTime, p.Start) - p.Start
	status, late := get(fmt.Sprintf("from=%d&to=%d", peak+1, p.RunTime()))
	if status != http.StatusOK {
		t.Fatalf("after the peak: status %d, %v", status, late)
	}
	for _, e := range late["events"].([]any) {
		if k := e.(map[string]any)["kind"]; k != "free" {
			t.Fatalf("after the peak: an event of kind %v", k)
		}
	}
	for _, q := range []string{"from=x&to=1", "from=5&to=1", "to=1", "from=0&to=1&pid=7"} {
		if status, body := get(q); status != http.StatusBadRequest || body["error"] == "" {
			t.Errorf("%s: status %d, %v; want 400 and an error", q, status, body)
		}
	}
}

// htmlPage returns the page report -html writes of trace.
func htmlPage(t *testing.T, trace string) *strings.Builder {
	t.Helper()
	var page strings.Builder
	if err := web.WriteHTML(&page, trace, report.ProcessID{}); err != nil {
		t.Fatal(err)
	}
	return &page
}

// TestHTMLFile writes the page of report -html and opens it from a file,
// with no server: the timeline, the flame graph and the leaks are there.
func TestHTMLFile(t *testing.T) {
	trace := widgetTrace(t)
	p := model(t, trace)
	page := htmlPage(t, trace)
	file := filepath.Join(t.TempDir(), "widget.html")
	if err := os.WriteFile(file, []byte(page.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{`src="app.js"`, `href="style.css"`, `src="http`, `href="http`, "url(http", "@import"} {
		if strings.Contains(page.String(), ref) {
			t.Errorf("the page refers to %s: it must hold everything itself", ref)
		}
	}
	ctx := browser(t)
	do(t, ctx, "opening the page", chromedp.Navigate("file://"+file))
	hasText(t, ctx, "the header's peak", "#summary-peak", report.Size(p.Summary.PeakBytes))
	tab(t, ctx, "timeline")
	waitFor(t, ctx, "the peak's marker", `document.querySelector("#timeline-peak-marker") !== null`)
	tab(t, ctx, "flame")
	waitFor(t, ctx, "make_red_widget", `[...document.querySelectorAll("#flame .frame")].some(e => e.dataset.function === "make_red_widget")`)
	tab(t, ctx, "leaks")
	waitFor(t, ctx, "a frame of make_widget", makeWidgetLink+" !== undefined")
}

// TestHeapMapHighlight picks an object and finds it highlighted in the
// heap map: in the cell that holds its address.
func TestHeapMapHighlight(t *testing.T) {
	trace := widgetTrace(t)
	ts := serve(t, trace)
	// The heap map at exit, as the server sends it.
	resp := ts.get(t, "/api/view?view=heapmap")
	var hm struct {
		Data struct {
			CellBytes uint64 `json:"cell_bytes"`
			Regions   []struct {
				Start, End string
				FirstCell  int `json:"first_cell"`
			}
			Cells []struct{ Used, Blocks uint64 }
		}
	}
	err := json.NewDecoder(resp.Body).Decode(&hm)
	resp.Body.Close()
	if err != nil || len(hm.Data.Regions) == 0 {
		t.Fatalf("the heap map: %v, %+v", err, hm.Data.Regions)
	}
	var used, blocks uint64
	for _, c := range hm.Data.Cells {
		used, blocks = used+c.Used, blocks+c.Blocks
	}
	p := model(t, trace)
	if used != p.Summary.InUseAtExitBytes || blocks != p.Summary.InUseAtExitBlocks {
		t.Errorf("the heap map at exit holds %d bytes in %d blocks, want the %d in %d in use at exit",
			used, blocks, p.Summary.InUseAtExitBytes, p.Summary.InUseAtExitBlocks)
	}

	ctx := browser(t)
	do(t, ctx, "opening the UI", chromedp.Navigate(ts.page()))
	tab(t, ctx, "objects")
	waitFor(t, ctx, "the object list", `document.querySelectorAll("#objects-table tbody tr").length > 0`)
	addr := eval[string](t, ctx, `(() => { const r = document.querySelector("#objects-table tbody tr"); r.click(); return r.querySelector("code").textContent.match(/0x[0-9a-f]+/)[0]; })()`)
	waitFor(t, ctx, "the object's story", `document.querySelector("#object-in-heap") !== null`)
	// Every object has its lifetime arc, and the one picked is marked.
	if n, rows := eval[int](t, ctx, `document.querySelectorAll("#object-arcs .arc-life").length`),
		eval[int](t, ctx, `document.querySelectorAll("#objects-table tbody tr").length`); n != rows {
		t.Errorf("%d lifetime arcs for %d objects", n, rows)
	}
	if sel := eval[int](t, ctx, `document.querySelectorAll("#object-arcs .arc-life.selected").length`); sel != 1 {
		t.Errorf("%d arcs marked for the object picked, want 1", sel)
	}
	shot(t, ctx, "objects")
	do(t, ctx, "showing the object in the heap map", chromedp.Click(chromedp.CSS("#object-in-heap")))
	waitFor(t, ctx, "the heap map tab", `document.querySelector("#tab-heap").classList.contains("active")`)
	waitFor(t, ctx, "the highlighted cell", `document.querySelector("#heapmap .cell.highlight") !== null`)
	got := eval[int](t, ctx, `+document.querySelector("#heapmap .cell.highlight").dataset.index`)

	var a uint64
	fmt.Sscanf(addr, "0x%x", &a)
	want := -1
	for _, r := range hm.Data.Regions {
		var start, end uint64
		fmt.Sscanf(r.Start, "0x%x", &start)
		fmt.Sscanf(r.End, "0x%x", &end)
		if start <= a && a < end {
			want = r.FirstCell + int((a-start)/hm.Data.CellBytes)
		}
	}
	if got != want {
		t.Errorf("the object at %s is highlighted in cell %d, want cell %d", addr, got, want)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("#heapmap .cell.highlight").length`); n != 1 {
		t.Errorf("%d cells highlighted, want 1", n)
	}
	shot(t, ctx, "heapmap")
}

// TestWindow drags across the timeline to choose a window, then moves it
// later and makes it wider: every view follows, and the leaks of the
// widget program's first moments are its blocks not yet freed then.
func TestWindow(t *testing.T) {
	trace := widgetTrace(t)
	p := model(t, trace)
	ctx := openUI(t, trace)
	tab(t, ctx, "timeline")
	waitFor(t, ctx, "the timeline", `document.querySelector("#timeline-peak-marker") !== null`)
	box := eval[[]float64](t, ctx, `(() => { const r = document.querySelector("#timeline").getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()`)
	y := box[1] + box[3]/2
	do(t, ctx, "dragging across the timeline",
		chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, box[0]+box[2]*0.3, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, box[0]+box[2]*0.4, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, box[0]+box[2]*0.45, y, chromedp.ButtonLeft))
	waitFor(t, ctx, "a window", `location.hash.includes("to=")`)
	window := func() (uint64, uint64) {
		h := eval[string](t, ctx, `location.hash.slice(1)`)
		q, err := url.ParseQuery(h)
		if err != nil {
			t.Fatal(err)
		}
		var from, to uint64
		fmt.Sscan(q.Get("from"), &from)
		fmt.Sscan(q.Get("to"), &to)
		return from, to
	}
	from, to := window()
	if to <= from || to > p.RunTime() {
		t.Fatalf("the window is %d to %d ns, in a run of %d", from, to, p.RunTime())
	}
	hasText(t, ctx, "the window's label", "#window-label", "Window: ")

	do(t, ctx, "moving the window later", chromedp.Click(chromedp.CSS("#window-later")))
	waitFor(t, ctx, "the window moved", fmt.Sprintf(`!location.hash.includes("to=%d")`, to))
	from2, to2 := window()
	// Later by half its length, within the run, the length kept.
	wantTo := min(to+(to-from)/2, p.RunTime())
	near := func(a, b uint64) bool { return a+1 >= b && b+1 >= a }
	if !near(to2, wantTo) || !near(to2-from2, to-from) {
		t.Errorf("moved later, the window %d–%d became %d–%d; want it to end at %d, as long", from, to, from2, to2, wantTo)
	}
	do(t, ctx, "zooming out", chromedp.Click(chromedp.CSS("#window-wider")))
	waitFor(t, ctx, "the window grew", fmt.Sprintf(`!location.hash.includes("to=%d")`, to2))
	from3, to3 := window()
	if to3-from3 <= to2-from2 && !(from3 == 0 && to3 == 0) {
		t.Errorf("zoomed out, the window %d–%d became %d–%d", from2, to2, from3, to3)
	}
	do(t, ctx, "going back to the whole run", chromedp.Click(chromedp.CSS("#window-reset")))
	hasText(t, ctx, "the window's label", "#window-label", "Whole run")
}

// TestFlameKeyboard walks the flame graph with the keyboard: Tab reaches
// a frame, Enter zooms into it, O opens its source.
func TestFlameKeyboard(t *testing.T) {
	trace := widgetTrace(t)
	ctx := openUI(t, trace)
	tab(t, ctx, "flame")
	const red = `[...document.querySelectorAll("#flame .frame")].find(e => e.dataset.function === "make_red_widget")`
	waitFor(t, ctx, "make_red_widget", red+` !== undefined`)
	eval[bool](t, ctx, `(`+red+`.focus(), true)`)
	do(t, ctx, "pressing Enter", chromedp.KeyEvent("\r"))
	waitFor(t, ctx, "the zoom into make_red_widget", `!document.querySelector("#flame-reset").disabled && document.activeElement.dataset.function === "make_red_widget"`)
	do(t, ctx, "pressing O", chromedp.KeyEvent("o"))
	hasText(t, ctx, "the source's title", "#source-title", "widget.c:")
}

// TestStatus waits for the server's background work to be done.
func TestStatus(t *testing.T) {
	ts := serve(t, widgetTrace(t))
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp := ts.get(t, "/api/status")
		var st struct {
			Frames, Ready bool
			Checkpoints   int
		}
		err := json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st.Ready {
			if !st.Frames {
				t.Error("ready before the frames are looked up")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 20 s: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestChanges serves the widget program compared with the boxes program
// (memtrail view -compare): /api/diff's totals are the differences of the
// two summaries, and the Changes tab lists the stacks that grew and
// shrank; a click on one shows its stack, whose source opens, though it
// is a file of the older trace only.
func TestChanges(t *testing.T) {
	newTrace, oldTrace := widgetTrace(t), boxesTrace(t)
	s, err := web.New(newTrace)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Compare(oldTrace); err != nil {
		t.Fatal(err)
	}
	ts := serveServer(t, s)

	resp := ts.get(t, "/api/diff")
	var d struct {
		Totals []struct {
			Cost     string
			Old, New uint64
			Change   int64
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&d)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	oldP, newP := model(t, oldTrace), model(t, newTrace)
	want := map[string][2]uint64{
		"peak":      {oldP.Summary.PeakBytes, newP.Summary.PeakBytes},
		"allocated": {oldP.Summary.BytesAllocated, newP.Summary.BytesAllocated},
		"leaked":    {oldP.Summary.InUseAtExitBytes, newP.Summary.InUseAtExitBytes},
	}
	for _, tot := range d.Totals {
		if w, ok := want[tot.Cost]; ok && (tot.Old != w[0] || tot.New != w[1] || tot.Change != int64(w[1])-int64(w[0])) {
			t.Errorf("total %s: %d -> %d (%+d), want %d -> %d", tot.Cost, tot.Old, tot.New, tot.Change, w[0], w[1])
		}
	}

	ctx := browser(t)
	do(t, ctx, "opening the UI", chromedp.Navigate(ts.page()))
	waitFor(t, ctx, "the Changes tab", `!document.querySelector('button[data-tab="diff"]').hidden`)
	tab(t, ctx, "diff")
	hasText(t, ctx, "the base", "#diff-base", "since "+oldTrace)
	hasText(t, ctx, "the totals", "#diff-totals", "in use at exit")
	// The widgets' leak grew from nothing; the boxes' stacks shrank to it.
	waitFor(t, ctx, "the stacks", `document.querySelectorAll("#diff-table tbody tr").length > 1`)
	hasText(t, ctx, "the stacks", "#diff-table", "make_widget")
	if n := eval[int](t, ctx, `document.querySelectorAll("#diff-table .grew").length`); n == 0 {
		t.Error("no stack grew")
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("#diff-table .shrank").length`); n == 0 {
		t.Error("no stack shrank")
	}
	do(t, ctx, "picking the in-use-at-exit measure", chromedp.SetValue(chromedp.CSS("#diff-cost"), "leaked"))
	eval[bool](t, ctx, `document.querySelector("#diff-cost").dispatchEvent(new Event("change"))`)
	hasText(t, ctx, "the first stack by in use at exit", "#diff-table tbody tr", "make_widget")
	shot(t, ctx, "changes")
	// A stack of the older program only: its source is a file of that
	// trace, which the server serves too.
	do(t, ctx, "filtering for the boxes", chromedp.SendKeys(chromedp.CSS("#diff-filter"), "Box"))
	waitFor(t, ctx, "a box stack", `Array.from(document.querySelectorAll("#diff-table tbody tr")).some((tr) => !tr.hidden)`)
	eval[bool](t, ctx, `(Array.from(document.querySelectorAll("#diff-table tbody tr")).find((tr) => !tr.hidden).click(), true)`)
	waitFor(t, ctx, "its stack", `document.querySelector("#diff-detail .frame-link") !== null`)
	eval[bool](t, ctx, `(document.querySelector("#diff-detail .frame-link").click(), true)`)
	hasText(t, ctx, "the source panel", ".source-lines", "Box")
}

// The stack's phases are 5 ms apart: in units of 100 us, whose times
// the agent reads from the CPU's counter at each event, they fall in
// different units even when the recorder's clock lags on a loaded
// machine, as it can by more than 5 ms at the default unit.
var stacks, exactStacks = recorded{timeUnit: 100 * time.Microsecond}, recorded{stackCalls: true, timeUnit: 100 * time.Microsecond}

// stackTrace records testdata/stack.c, whose stack grows and shrinks.
func stackTrace(t *testing.T) string {
	prog := fixture.Build(t, "testdata/stack.c")
	return stacks.record(t, func(string) ([]string, error) { return []string{prog}, nil })
}

// exactStackTrace records testdata/stack.c built with
// -finstrument-functions, with its every function entry and return.
func exactStackTrace(t *testing.T) string {
	prog := fixture.Build(t, "testdata/stack.c", "-g", "-O0", "-finstrument-functions")
	return exactStacks.record(t, func(string) ([]string, error) { return []string{prog}, nil })
}

// TestStackLane opens a program whose stack grows to 48 levels of 1 KiB
// and back: the timeline draws the stack above the heap, higher in the
// middle of the run than at its start, with its peak marked, and the
// header gives the peak; a trace without stack samples has no lane.
func TestStackLane(t *testing.T) {
	trace := stackTrace(t)
	p := model(t, trace)
	if p.Summary.StackPeakBytes < 48<<10 {
		t.Fatalf("the stack peak is %d bytes, less than the 48 KiB of the deepest phase", p.Summary.StackPeakBytes)
	}
	ctx := openUI(t, trace)
	waitFor(t, ctx, "the stack lane", `document.querySelector("#timeline-stack") !== null`)
	hasText(t, ctx, "the header's stack peak", "#summary-stack", report.Size(p.Summary.StackPeakBytes))
	hasText(t, ctx, "the stack peak marker", "#timeline-stack-marker", "stack peak "+report.Size(p.Summary.StackPeakBytes))
	// The lane is drawn as steps: its highest point is above its first.
	ys := eval[[]float64](t, ctx, `document.querySelector("#timeline-stack").getAttribute("d").split("L").slice(1, -1).map((s) => Number(s.split(",")[1]))`)
	if len(ys) < 4 {
		t.Fatalf("the stack lane has %d points", len(ys))
	}
	top := ys[0]
	for _, y := range ys {
		top = min(top, y)
	}
	if top >= ys[0]-10 {
		t.Errorf("the stack lane does not rise in the middle of the run: it starts at y=%.0f and its top is at y=%.0f", ys[0], top)
	}
	// A click on the peak shows the deepest stack: the deepest heap event,
	// 48 levels of descend (one of them at the call of malloc), under
	// main.
	do(t, ctx, "clicking the stack's peak", chromedp.Click(chromedp.CSS("#timeline-stack-marker circle")))
	hasText(t, ctx, "the deepest stack's title", "#deepest-title", "Deepest stack: "+report.Size(p.Summary.StackPeakBytes))
	hasText(t, ctx, "the deepest stack", "#deepest-stack", "descend× 47")
	hasText(t, ctx, "the deepest stack", "#deepest-stack", "main")
	shot(t, ctx, "timeline-stack")

	hasText(t, ctx, "the timeline's title", "#timeline-title", "Stack and heap over time")

	// Built for exact mode, the deepest stack is the entry of the deepest
	// level, and its frames have their sizes.
	exact := exactStackTrace(t)
	ep := model(t, exact)
	if !ep.Summary.DeepestStack.FunctionEntry {
		t.Fatalf("exact mode: the deepest stack is %+v, want one at a function entry", ep.Summary.DeepestStack)
	}
	ctx = openUI(t, exact)
	waitFor(t, ctx, "the stack lane", `document.querySelector("#timeline-stack-marker") !== null`)
	do(t, ctx, "clicking the stack's peak", chromedp.Click(chromedp.CSS("#timeline-stack-marker circle")))
	hasText(t, ctx, "the deepest stack's title", "#deepest-title", "at a function entry")
	hasText(t, ctx, "the deepest stack", "#deepest-stack", "descend× 49")
	hasText(t, ctx, "the deepest stack", "#deepest-stack", "main")
	if n := eval[int](t, ctx, `document.querySelectorAll("#deepest-stack .frame-size").length`); n != eval[int](t, ctx, `document.querySelectorAll("#deepest-stack li").length`) {
		t.Errorf("exact mode: %d frames of the deepest stack have a size, want all", n)
	}
	shot(t, ctx, "timeline-stack-exact")

	// A trace of version 1, written before events carried the stack (a
	// copy: the server keeps its analysis beside it).
	data, err := os.ReadFile(filepath.Join("..", "trace", "testdata", "version1.mtr"))
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "version1.mtr")
	if err := os.WriteFile(old, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx = openUI(t, old)
	waitFor(t, ctx, "the timeline", `document.querySelector("#timeline .heap-area") !== null`)
	if eval[bool](t, ctx, `document.querySelector("#timeline-stack") !== null || !document.querySelector("#summary-stack-stat").hidden`) {
		t.Error("a stack lane or stack peak for a trace whose events carry no stack")
	}
	hasText(t, ctx, "the timeline's title", "#timeline-title", "Heap over time")
}

var lostBlocks = recorded{leakScan: true}

// TestLostChains opens a program that leaves blocks in every leak class,
// recorded with its leak scan: the Leaks tab gives the classes valgrind
// --leak-check=full gives, and the definitely lost blocks with what hangs
// from them, first the list that lost_list lost (four nodes of 40 bytes).
func TestLostChains(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("..", "record", "testdata", "leaks.c"))
	trace := lostBlocks.record(t, func(string) ([]string, error) { return []string{prog, "mix"}, nil })
	want := fixture.Valgrind(t, prog, "mix")[0].Leaks
	ctx := openUI(t, trace)
	tab(t, ctx, "leaks")
	waitFor(t, ctx, "the leak classes", `document.querySelector("#leak-classes") !== null`)
	hasText(t, ctx, "the definitely lost", "#leak-classes", fmt.Sprintf("definitely lost%s in %s", exactBytes(want.DefinitelyLostBytes), report.Plural(want.DefinitelyLostBlocks, "block")))
	hasText(t, ctx, "the still reachable", "#leak-classes", fmt.Sprintf("still reachable%s in %s", exactBytes(want.StillReachableBytes), report.Plural(want.StillReachableBlocks, "block")))
	waitFor(t, ctx, "lost_list's chain", `[...document.querySelectorAll(".lost-chain")].some((c) => c.textContent.includes("lost_list") && c.textContent.includes("160 B in 4 blocks"))`)
	hasText(t, ctx, "the possibly lost blocks", ".possibly-lost", fmt.Sprintf("%d B in 1 block, from", 100))
	hasText(t, ctx, "the possibly lost blocks' stack", ".possibly-lost", "interior")
	shot(t, ctx, "leaks-chains")
}

var freedHead = recorded{leakOrigins: true}

// TestLeakOriginsShown opens a program that frees a list's head while it
// still points to the rest, recorded with -leak-origins: the lost chain
// says that the free in freed_head made it unreachable, all 120 bytes.
func TestLeakOriginsShown(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("..", "record", "testdata", "leaks.c"))
	trace := freedHead.record(t, func(string) ([]string, error) { return []string{prog, "freed_head"}, nil })
	ctx := openUI(t, trace)
	tab(t, ctx, "leaks")
	waitFor(t, ctx, "the lost chain", `document.querySelector(".lost-chain") !== null`)
	hasText(t, ctx, "where the leak was made", ".lost-chain .origin", "made unreachable by a free of the block that pointed to it: 120 B in 3 blocks, freed from")
	hasText(t, ctx, "the free's stack", ".lost-chain .origin + .stack", "freed_head")
	shot(t, ctx, "leaks-origins")
}

// exactBytes writes n bytes, under 1 KiB, as the UI's fmtBytesExact does.
func exactBytes(n uint64) string { return fmt.Sprintf("%d B", n) }

// TestCutStackWarning opens a trace whose allocations have call stacks
// deeper than its depth limit: the summary shows the report's warning
// about them, with how much of the peak they hold.
func TestCutStackWarning(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("..", "..", "cmd", "memtrail", "testdata", "deep300.c"))
	res, err := record.Run(record.Options{Args: []string{prog}, Output: filepath.Join(t.TempDir(), "deep.mtr"),
		AgentPath: fixture.Agent(t), MaxFrames: 64, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := openUI(t, res.Path)
	hasText(t, ctx, "the summary's notes", "#summary-notes", "1 warning")
	title := eval[string](t, ctx, `(document.querySelector("#summary-notes .warn") || {title: ""}).title`)
	if want := "call stacks cut at 64 frames: 3 allocations, 3000 bytes at the peak (75.0% of it)"; !strings.Contains(title, want) {
		t.Errorf("the warning says %q, want %q in it", title, want)
	}
}

var unnamed recorded

// TestDeepestUnnamedFrames opens report's testdata/unnamed.c, stripped,
// whose deepest stack runs through distinct frames known only by their
// addresses: the UI lists them one by one, as the text report does, and
// makes one only self's recursion, at one address.
func TestDeepestUnnamedFrames(t *testing.T) {
	built := fixture.Build(t, filepath.Join("..", "report", "testdata", "unnamed.c"), "-g0", "-O0")
	trace := unnamed.record(t, func(dir string) ([]string, error) {
		prog := filepath.Join(dir, "unnamed")
		if out, err := exec.Command("strip", "-o", prog, built).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("strip: %v\n%s", err, out)
		}
		return []string{prog}, nil
	})
	var want []string
	for _, f := range model(t, trace).DeepestFrames() {
		if f.Function == "" && filepath.Base(f.Object) == "unnamed" {
			want = append(want, f.Name())
		}
	}
	if len(want) < 10 {
		t.Fatalf("the deepest stack has %d frames of the program, want 10 at least: %v", len(want), want)
	}
	// self at the malloc, self × 4, pong, ping, pong, ping, main.
	lines := append([]string{want[0], want[1] + "× 4"}, want[5:10]...)
	ctx := openUI(t, trace)
	waitFor(t, ctx, "the stack lane", `document.querySelector("#timeline-stack-marker") !== null`)
	do(t, ctx, "clicking the stack's peak", chromedp.Click(chromedp.CSS("#timeline-stack-marker circle")))
	waitFor(t, ctx, "the deepest stack", `document.querySelector("#deepest-stack") !== null`)
	got := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#deepest-stack li")).map((li) => li.textContent.trim())`)
	if len(got) < len(lines) || !slices.Equal(got[:len(lines)], lines) {
		t.Errorf("the UI's deepest stack is %q, want it to start with %q", got, lines)
	}
}
