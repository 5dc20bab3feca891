package web_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/export"
	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/record"
	"github.com/memtrail/memtrail/internal/report"
)

var threads, alone = recorded{leakScan: true}, recorded{leakScan: true}

// threadsTrace records testdata/threads.c, with its library helper.so
// stripped, and its leak scan: four blocks in use at exit, the thread's
// (from pthread_create) possibly lost; or, with mode "alone", two, still
// reachable.
func threadsTrace(t *testing.T, mode ...string) string {
	lib := fixture.Build(t, "testdata/helper.so.c", "-O0", "-s", "-shared", "-fPIC")
	prog := fixture.Build(t, "testdata/threads.c", "-g", "-O0", "-Wl,--no-as-needed", lib)
	r := &threads
	if len(mode) > 0 {
		r = &alone
	}
	return r.record(t, func(string) ([]string, error) { return append([]string{prog}, mode...), nil })
}

// objectSizes returns the sizes the Objects tab lists, once it lists n.
func objectSizes(t *testing.T, ctx context.Context, n int) []string {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf("%d objects", n), fmt.Sprintf(`document.querySelectorAll("#objects-table tbody tr").length === %d && !document.querySelector("#objects-status").classList.contains("loading")`, n))
	return eval[[]string](t, ctx, `[...document.querySelectorAll("#objects-table tbody tr")].map((tr) => tr.children[2].textContent)`)
}

// TestFilters keeps the blocks of one thread, then those of one module,
// as memtrail report -thread and -module do; then hides the frames below
// main.
func TestFilters(t *testing.T) {
	ctx := openUI(t, threadsTrace(t))
	tab(t, ctx, "objects")
	// And the thread's own block, which pthread_create allocates.
	if got := objectSizes(t, ctx, 4); !strings.Contains(strings.Join(got, " "), "300 B 272 B 200 B 100 B") {
		t.Errorf("the objects: %v, want 300, 272, 200 and 100 B", got)
	}
	setField := func(id, v string) {
		t.Helper()
		eval[bool](t, ctx, fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q; e.dispatchEvent(new Event("change")); return true; })()`, id, v))
	}
	setField("#filter-thread", "2")
	if got := objectSizes(t, ctx, 1); got[0] != "300 B" {
		t.Errorf("the objects of thread 2: %v, want the 300 B its function allocated", got)
	}
	if h := eval[string](t, ctx, `location.hash`); !strings.Contains(h, "thread=2") {
		t.Errorf("the address says %q, want the thread in it", h)
	}
	setField("#filter-thread", "")
	setField("#filter-module", `helper\.so`)
	if got := objectSizes(t, ctx, 1); got[0] != "200 B" {
		t.Errorf("the objects with code in helper.so: %v, want the 200 B it allocated", got)
	}
	setField("#filter-module", "")
	objectSizes(t, ctx, 4)

	// main's object: its stack goes on below main, unless hidden.
	pick := `(() => { const tr = [...document.querySelectorAll("#objects-table tbody tr")].find((tr) => tr.children[2].textContent === "100 B"); tr.click(); return true; })()`
	eval[bool](t, ctx, pick)
	waitFor(t, ctx, "main's object", `[...document.querySelectorAll("#object-detail .stack-frame .fn")].some((e) => e.textContent === "main")`)
	below := `(() => { const fns = [...document.querySelectorAll("#object-detail .stack-frame .fn")].map((e) => e.textContent); return fns.length - fns.lastIndexOf("main") - 1; })()`
	if n := eval[int](t, ctx, below); n == 0 {
		t.Fatal("main's object has no frame below main to hide")
	}
	do(t, ctx, "hiding the frames below main", chromedp.Click(chromedp.CSS("#filter-below-main")))
	objectSizes(t, ctx, 4)
	eval[bool](t, ctx, pick)
	waitFor(t, ctx, "main's object", `[...document.querySelectorAll("#object-detail .stack-frame .fn")].some((e) => e.textContent === "main")`)
	if n := eval[int](t, ctx, below); n != 0 {
		t.Errorf("%d frames below main still shown", n)
	}
	hasText(t, ctx, "the note", "#object-detail .below-main", "below main, hidden")
}

// TestUnsymbolizedFrame shows a frame of code without a symbol as
// memtrail report names it: object+offset.
func TestUnsymbolizedFrame(t *testing.T) {
	trace := threadsTrace(t)
	p := model(t, trace)
	want := ""
	for i := range p.Sites {
		if s := p.SiteStack(&p.Sites[i]); len(s) > 0 && strings.HasPrefix(s[0].Object, filepath.Dir(s[0].Object)+"/helper.so") {
			want = s[0].Name()
			if s[0].Function != "" {
				t.Fatalf("helper.so's frame has the function %s: the test needs one without a symbol", s[0].Function)
			}
		}
	}
	if !strings.Contains(want, "+0x") {
		t.Fatalf("no frame of helper.so named object+offset (%q)", want)
	}
	ctx := openUI(t, trace)
	tab(t, ctx, "objects")
	objectSizes(t, ctx, 4)
	eval[bool](t, ctx, `(() => { [...document.querySelectorAll("#objects-table tbody tr")].find((tr) => tr.children[2].textContent === "200 B").click(); return true; })()`)
	hasText(t, ctx, "helper.so's frame", "#object-detail .stack-frame .fn", want)
	hasText(t, ctx, "the object's function", "#objects-table tbody tr.selected", want)
}

// TestExitColor: in use at exit is red when blocks are lost, amber when
// some are possibly lost, and plain when all of it is still reachable.
func TestExitColor(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("..", "record", "testdata", "leaks.c"))
	for _, c := range []struct {
		what, trace, class string
	}{
		{"all still reachable", threadsTrace(t, "alone"), "reachable"},
		{"some possibly lost", threadsTrace(t), "warn"},
		{"some lost", lostBlocks.record(t, func(string) ([]string, error) { return []string{prog, "mix"}, nil }), "bad"},
	} {
		ctx := openUI(t, c.trace)
		waitFor(t, ctx, "the header", `document.querySelector("#summary-exit").textContent !== "–"`)
		if cls := eval[string](t, ctx, `document.querySelector("#summary-exit").className`); cls != c.class {
			t.Errorf("in use at exit, %s, has the classes %q; want %s", c.what, cls, c.class)
		}
	}
}

// TestTabsInAddress opens the UI at an address with a tab, switches tabs,
// and goes Back and Forward.
func TestTabsInAddress(t *testing.T) {
	ts := serve(t, widgetTrace(t))
	ctx := browser(t)
	active := `document.querySelector("main > .panel.active").id`
	do(t, ctx, "opening the UI at #/leaks", chromedp.Navigate(ts.page()+"#/leaks"))
	waitFor(t, ctx, "the Leaks tab", active+` === "tab-leaks"`)
	if u := eval[string](t, ctx, `location.href`); strings.Contains(u, "token") {
		t.Errorf("the address still holds the token: %s", u)
	}
	tab(t, ctx, "objects")
	if h := eval[string](t, ctx, `location.hash`); h != "#/objects" {
		t.Errorf("the Objects tab's address ends in %q, want #/objects", h)
	}
	tab(t, ctx, "flame")
	eval[bool](t, ctx, `(history.back(), true)`)
	waitFor(t, ctx, "Back: the Objects tab", active+` === "tab-objects"`)
	eval[bool](t, ctx, `(history.back(), true)`)
	waitFor(t, ctx, "Back again: the Leaks tab", active+` === "tab-leaks"`)
	eval[bool](t, ctx, `(history.forward(), true)`)
	waitFor(t, ctx, "Forward: the Objects tab", active+` === "tab-objects"`)
	// A fragment typed in, without the slash.
	eval[bool](t, ctx, `(location.hash = "#tables", true)`)
	waitFor(t, ctx, "#tables: the Tables tab", active+` === "tab-tables"`)
}

// TestObjectsMore opens the Objects tab of the widget program, which has
// 5,019 objects live at exit: it says so, shows the first 100, and more
// when asked; and no column is cut off.
func TestObjectsMore(t *testing.T) {
	trace := widgetTrace(t)
	p := model(t, trace)
	ctx := openUI(t, trace)
	tab(t, ctx, "objects")
	objectSizes(t, ctx, 100)
	hasText(t, ctx, "the count", "#objects-info", fmt.Sprintf("the first 100 of %s objects", commas(p.Summary.InUseAtExitBlocks)))
	shot(t, ctx, "objects")
	do(t, ctx, "asking for more", chromedp.Click(chromedp.CSS("#objects-more")))
	objectSizes(t, ctx, 200)
	hasText(t, ctx, "the count", "#objects-info", fmt.Sprintf("the first 200 of %s objects", commas(p.Summary.InUseAtExitBlocks)))
	// Every column fits: the table does not scroll sideways, nor is a
	// cell's text cut.
	for _, width := range []int64{1400, 1200, 1000} {
		do(t, ctx, "resizing", chromedp.EmulateViewport(width, 900))
		cut := eval[[]string](t, ctx, `(() => {
			const out = [];
			const wrap = document.querySelector("#objects .table-wrap");
			if (wrap.scrollWidth > wrap.clientWidth + 1) out.push("the table scrolls sideways: " + wrap.scrollWidth + " > " + wrap.clientWidth);
			for (const td of document.querySelectorAll("#objects-table tbody tr:first-child td")) {
				if (td.scrollWidth > td.clientWidth + 1) out.push("cell " + td.textContent + " is cut");
			}
			return out;
		})()`)
		for _, c := range cut {
			t.Errorf("%d px wide: %s", width, c)
		}
	}
}

// commas writes n as the UI counts: 5,019.
func commas(n uint64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestDownload gets every export of the trace: a file to save, named
// after the trace, in its format; the page links to each.
func TestDownload(t *testing.T) {
	trace := widgetTrace(t)
	ts := serve(t, trace)
	for _, c := range []struct {
		format, file, starts string
	}{
		{"pprof", "trace.pb.gz", "\x1f\x8b"},
		{"massif", "trace.massif.out", "desc:"},
		{"collapsed&cost=leaked", "trace.leaked.folded", "main;make_red_widget;make_widget"},
		{"parquet", "trace.parquet.zip", "PK"},
	} {
		resp := ts.get(t, "/api/export?format="+c.format)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d, %v: %.200s", c.format, resp.StatusCode, err, body)
			continue
		}
		disp, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Disposition"))
		if disp != "attachment" || params["filename"] != c.file {
			t.Errorf("%s: Content-Disposition %q, want an attachment named %s", c.format, resp.Header.Get("Content-Disposition"), c.file)
		}
		if !bytes.HasPrefix(body, []byte(c.starts)) && !(strings.HasPrefix(c.format, "collapsed") && bytes.Contains(body, []byte("\n"+c.starts+" "))) {
			t.Errorf("%s: the file starts with %q, want %q", c.format, body[:min(len(body), 40)], c.starts)
		}
		if c.format == "parquet" {
			z, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
			if err != nil || len(z.File) != 2 || z.File[0].Name != "events.parquet" || z.File[1].Name != "stacks.parquet" {
				t.Errorf("parquet: %v, want a zip of events.parquet and stacks.parquet", err)
			}
		}
	}
	resp := ts.get(t, "/api/export?format=svg")
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown format: status %d, want 400", resp.StatusCode)
	}

	ctx := browser(t)
	do(t, ctx, "opening the UI", chromedp.Navigate(ts.page()))
	waitFor(t, ctx, "the header", `document.querySelector("#summary-peak").textContent !== "–"`)
	waitFor(t, ctx, "the download links", `document.querySelectorAll("#downloads a").length > 0`)
	eval[bool](t, ctx, `(Promise.all([...document.querySelectorAll("#downloads a")].map((a) => fetch(a.href).then((r) => r.status + " " + r.headers.get("Content-Disposition")))).then((l) => { window.fetchedDownloads = l; }), true)`)
	waitFor(t, ctx, "the downloads", `window.fetchedDownloads !== undefined`)
	got := eval[[]string](t, ctx, `window.fetchedDownloads`)
	if len(got) != 4 {
		t.Fatalf("the page has %d download links, want 4", len(got))
	}
	for _, g := range got {
		if !strings.HasPrefix(g, "200 attachment") {
			t.Errorf("a download link answers %s", g)
		}
	}
}

// TestExecImages picks image 2 of a pid that exec'd twice (cmd/memtrail's
// multi exec2) in the process picker, which lists every image by report's
// name for it, pid.N: the header shows that image's numbers, as
// memtrail report -pid N.2 -json does, and the address keeps it.
func TestExecImages(t *testing.T) {
	prog := fixture.Build(t, filepath.Join("..", "..", "cmd", "memtrail", "testdata", "multi.c"))
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	var log strings.Builder
	res, err := record.Run(record.Options{Args: []string{prog, "exec2"}, Output: filepath.Join(t.TempDir(), "trace.mtr"),
		AgentPath: fixture.Agent(t), Stdin: devNull, Log: &log, Version: "test"})
	if err == nil {
		err = res.WriteErr
	}
	if err != nil {
		t.Fatalf("recording multi exec2: %v\n%s", err, log.String())
	}
	m, _, err := analysis.AnalyzeFile(res.Path, analysis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Processes) != 3 {
		t.Fatalf("multi exec2 recorded %d processes, want its 3 images", len(m.Processes))
	}
	pid := m.Processes[0].PID
	var out bytes.Buffer
	if err := report.Write(&out, m, report.Options{PID: pid, Image: 2}, true); err != nil {
		t.Fatal(err)
	}
	var want struct {
		Summary struct {
			PeakBytes uint64 `json:"peak_bytes"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out.Bytes(), &want); err != nil {
		t.Fatal(err)
	}
	image2 := fmt.Sprintf("%d.2", pid)

	ts := serve(t, res.Path)
	// Every API that takes a pid takes pid.N.
	for _, c := range []struct {
		path   string
		status int
		want   string
	}{
		{"/api/view?view=summary&pid=" + image2, http.StatusOK, fmt.Sprintf(`"peak_bytes": %d,`, want.Summary.PeakBytes)},
		{"/api/events?from=0&to=1000000000&pid=" + image2, http.StatusOK, `"count":`},
		{"/api/export?format=massif&pid=" + image2, http.StatusOK, "desc:"},
		{"/api/export?format=parquet&pid=" + image2, http.StatusBadRequest, "pid takes a pid alone"},
		{fmt.Sprintf("/api/view?view=summary&pid=%d.4", pid), http.StatusBadRequest, "there is no " + fmt.Sprintf("%d.4", pid)},
		{fmt.Sprintf("/api/view?view=summary&pid=%d.0", pid), http.StatusBadRequest, "counts from 1"},
	} {
		resp := ts.get(t, c.path)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: status %d, %.300s; want %d and %q", c.path, resp.StatusCode, body, c.status, c.want)
		}
		if name := resp.Header.Get("Content-Disposition"); c.status == http.StatusOK && name != "" && !strings.Contains(name, "trace."+image2+".massif.out") {
			t.Errorf("%s: %s, want the file named after image %s", c.path, name, image2)
		}
	}

	ctx := browser(t)
	do(t, ctx, "opening the UI", chromedp.Navigate(ts.page()))
	waitFor(t, ctx, "the process picker", `!document.querySelector("#process-picker").hidden`)
	options := eval[[]string](t, ctx, `[...document.querySelectorAll("#process option")].map((o) => o.value + " " + o.textContent)`)
	if len(options) != 3 {
		t.Fatalf("the picker lists %d processes, want the 3 images: %q", len(options), options)
	}
	for i, o := range options {
		id := fmt.Sprintf("%d.%d", pid, i+1)
		if !strings.HasPrefix(o, id+" pid "+id+":") {
			t.Errorf("the picker's image %d is %q, want it named %s", i+1, o, id)
		}
	}
	eval[bool](t, ctx, fmt.Sprintf(`(() => { const s = document.querySelector("#process"); s.value = %q; s.dispatchEvent(new Event("change")); return true; })()`, image2))
	peak := fmt.Sprintf("(%s bytes)", commas(want.Summary.PeakBytes))
	waitFor(t, ctx, "image 2's peak", fmt.Sprintf(`(document.querySelector("#summary-peak").getAttribute("title") || "").includes(%q)`, peak))
	hasText(t, ctx, "the header's process", "#summary-program .pid", "pid "+image2)
	if h := eval[string](t, ctx, `location.hash`); !strings.Contains(h, "pid="+image2) {
		t.Errorf("the address says %q, want pid=%s in it", h, image2)
	}
	// Its downloads: the formats of one process name its image, those of
	// every image of a pid (parquet) the pid alone.
	waitFor(t, ctx, "the download links", `document.querySelectorAll("#downloads a").length > 0`)
	eval[bool](t, ctx, `(Promise.all([...document.querySelectorAll("#downloads a")].map((a) => fetch(a.href).then((r) => r.status + " " + r.headers.get("Content-Disposition")))).then((l) => { window.fetchedDownloads = l; }), true)`)
	waitFor(t, ctx, "the downloads", `window.fetchedDownloads !== undefined`)
	for _, g := range eval[[]string](t, ctx, `window.fetchedDownloads`) {
		if !strings.HasPrefix(g, "200 attachment") || !strings.Contains(g, "trace."+image2+".") && !strings.Contains(g, fmt.Sprintf("trace.%d.parquet.zip", pid)) {
			t.Errorf("a download link of image 2 answers %s", g)
		}
	}

	// The address opens image 2 again.
	do(t, ctx, "opening the address", chromedp.Navigate(ts.page()+"#/timeline&pid="+image2))
	waitFor(t, ctx, "image 2's peak", fmt.Sprintf(`(document.querySelector("#summary-peak").getAttribute("title") || "").includes(%q)`, peak))
	if v := eval[string](t, ctx, `document.querySelector("#process").value`); v != image2 {
		t.Errorf("the picker shows %q, want %s", v, image2)
	}
}

// TestServerLimits: /api/status says the bounds of a request, report's,
// and the formats of package export, and the page offers a download of
// each, described as export describes it.
func TestServerLimits(t *testing.T) {
	ts := serve(t, widgetTrace(t))
	resp := ts.get(t, "/api/status")
	var st struct {
		Limits  struct{ Top, Frames, Chain, Events int } `json:"limits"`
		Formats []struct{ Name, Summary string }         `json:"formats"`
	}
	err := json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if st.Limits.Top != report.MaxTop || st.Limits.Frames != report.MaxFrames || st.Limits.Chain != report.MaxChain || st.Limits.Events == 0 {
		t.Errorf("the limits are %+v, want report's: top %d, frames %d, chain %d, and some events", st.Limits, report.MaxTop, report.MaxFrames, report.MaxChain)
	}
	var want []string
	for _, f := range export.Formats {
		want = append(want, f.Name+": "+f.Summary)
	}
	var got []string
	for _, f := range st.Formats {
		got = append(got, f.Name+": "+f.Summary)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the formats are %q, want %q", got, want)
	}

	ctx := browser(t)
	do(t, ctx, "opening the UI", chromedp.Navigate(ts.page()))
	waitFor(t, ctx, "the download links", `document.querySelectorAll("#downloads a").length > 0`)
	links := eval[[]string](t, ctx, `[...document.querySelectorAll("#downloads a")].map((a) => a.textContent + ": " + a.title)`)
	if !slices.Equal(links, want) {
		t.Errorf("the page's downloads are %q, want %q", links, want)
	}
}
