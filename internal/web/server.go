// Package web serves the analysis of a trace to a browser: the UI, from
// files embedded in the binary (ui/), and a JSON API that answers with the
// report package's JSON views of the trace, over any window of the run,
// and with the source files the trace's call stacks name.
//
//	GET /                      the UI (ui/index.html, app.js, style.css)
//	GET /api/view?view=NAME    a view, as memtrail report -json -view NAME prints it;
//	                           with pid, cost, from and to (ns after the process
//	                           started), top, chain, sort, thread, function, file,
//	                           module and ignore as report's flags
//	GET /api/source?path=PATH  {"path", "lines", "cut"}: a source file of the trace
//	                           (see sourceAccess for which)
//	GET /api/events?from=NS&to=NS  the memory events of a stretch of the run
//	                           (the first maxEvents), with their call stacks; and pid
//	GET /api/status            {"frames", "checkpoints", "stretches", "ready", "compare",
//	                           "limits", "formats"}: the server's background work (see
//	                           warm and makeWindows), the trace it compares with, if
//	                           any, the bounds of requests and the export formats
//	GET /api/diff?pid=PID      memtrail diff -json of the trace compared with (see
//	                           Compare) and this one's process pid
//	GET /api/export?format=F   the trace as memtrail export -format F writes it, a
//	                           file to save; with pid, and cost for collapsed
//
// A pid is as report's -pid takes it: 1234, or 1234.2 for the second
// image of a pid that exec'd (see report.ProcessID).
//
// Errors are JSON too: {"error": "one line"}, with a 4xx or 5xx status.
package web

import (
	"bytes"
	"cmp"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/report"
)

//go:embed ui
var uiFiles embed.FS

// Server serves one trace.
type Server struct {
	path string
	// token is the secret every request must carry (see guarded).
	token string
	// sources are the source files the trace's call stacks name: the
	// only files /api/source reads. They are known once warmed is closed.
	sources map[string]bool
	warmed  chan struct{}
	// base is the analysis of an older run to compare with, if any, and
	// baseSources the source files its stacks name (see Compare).
	base        *analysis.Model
	basePath    string
	baseSources map[string]bool
	// access says which of the sources may be read; buildDirs are the
	// working directories of the processes of the trace and of the base.
	access    *sourceAccess
	buildDirs []string
	sourceDir string

	mu sync.Mutex
	// windows makes the analyses of windows quick once made (see
	// makeWindows); checkpointed is closed then.
	windows      *analysis.Windows
	checkpointed chan struct{}
	models       recently[modelKey, *madeModel]
	// answers holds the answers to the latest view requests, by their
	// query: going back to a view is instant.
	answers recently[string, []byte]
}

// recently keeps the values of the latest keys used, at most n: the one
// used longest ago goes first.
type recently[K comparable, V any] struct {
	n     int
	m     map[K]V
	order []K // the latest used last
}

func (c *recently[K, V]) get(k K) (V, bool) {
	v, ok := c.m[k]
	if ok {
		i := slices.Index(c.order, k)
		c.order = append(slices.Delete(c.order, i, i+1), k)
	}
	return v, ok
}

// put keeps v for k, which has none.
func (c *recently[K, V]) put(k K, v V) {
	if len(c.order) == c.n {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	if c.m == nil {
		c.m = make(map[K]V)
	}
	c.m[k] = v
	c.order = append(c.order, k)
}

// madeModel is an analysis a server made or is making: the requests that
// need it wait for it, and only for it.
type madeModel struct {
	once sync.Once
	m    *analysis.Model
	err  error
}

// maxAnswers is how many answers a server keeps, and maxKeptAnswer the
// size of the biggest it keeps, so that what it keeps is bounded however
// long the lists asked for: a bigger answer is made again when asked
// again.
const (
	maxAnswers    = 64
	maxKeptAnswer = 1 << 20
)

// modelKey tells the analyses a server makes apart: by the options that
// its requests may set.
type modelKey struct {
	from, to         uint64
	objects, heapMap int
	// filters are the request's threads and stack filters, as given.
	filters string
}

// maxModels is how many analyses (of different windows) a server keeps.
const maxModels = 8

// New analyzes the trace at path (through its cache) and returns a server
// of it, or the error that makes the trace unreadable: a server never
// starts on a trace it cannot show.
func New(path string) (*Server, error) {
	s, m, err := open(path)
	if err != nil {
		return nil, err
	}
	// The views of call stacks go through the frames of every site:
	// look them up while the page loads its timeline, which needs none;
	// then prepare the windows, which takes longer.
	go func() {
		s.warm(m)
		s.makeWindows(m)
	}()
	return s, nil
}

// open returns a server of the trace at path, and its analysis, with no
// work in the background.
func open(path string) (*Server, *analysis.Model, error) {
	s := &Server{path: path, token: newToken(), warmed: make(chan struct{}), checkpointed: make(chan struct{}),
		models: recently[modelKey, *madeModel]{n: maxModels}, answers: recently[string, []byte]{n: maxAnswers}}
	m, err := s.model(analysis.Options{}, "")
	if err != nil {
		return nil, nil, err
	}
	if len(m.Processes) == 0 {
		return nil, nil, fmt.Errorf("%s holds no process", path)
	}
	s.buildDirs = buildDirs(m)
	if s.access, err = newSourceAccess(s.buildDirs, ""); err != nil {
		return nil, nil, err
	}
	return s, m, nil
}

// Windows: a window of the run needs the state of the replay where it
// begins, and its analysis would cost what the window costs to replay.
// The server reads the trace twice more in the background: once to keep
// that state every so often (about 32 times in a run, within
// checkpointBytes of memory held), and once to analyze each stretch
// between two of those checkpoints. A window is then put together from
// the stretches it takes in and the two parts at its ends, or replayed
// from the latest checkpoint before it (see analysis.Windows).
const (
	checkpointsPerRun   = 32
	minCheckpointEvents = 1 << 17
)

// checkpointBytes returns the memory the checkpoints may hold: a
// sixteenth of the machine's, from 256 MiB to 4 GiB. Their heap tables
// are most of it, about 30 bytes a live block, of which a checkpoint
// shares with the one before what the replay did not change between
// them: a heap of ten million blocks needs a few GiB for checkpoints all
// over its run, and a small machine keeps fewer of them, further apart.
func checkpointBytes() uint64 {
	const least, most = 256 << 20, 4 << 30
	var info syscall.Sysinfo_t
	if syscall.Sysinfo(&info) != nil {
		return least
	}
	return min(max(uint64(info.Totalram)*uint64(info.Unit)/16, least), most)
}

// makeWindows prepares the analysis of windows of the trace of model m.
func (s *Server) makeWindows(m *analysis.Model) {
	defer close(s.checkpointed)
	var events uint64
	for _, p := range m.Processes {
		events += p.Summary.Allocations + p.Summary.Frees + p.Summary.InvalidFrees + p.Summary.UncertainFrees
	}
	w, err := analysis.NewWindows(s.path, m, max(events/checkpointsPerRun, minCheckpointEvents), checkpointBytes())
	if err != nil {
		return // windows are analyzed from the start of the trace
	}
	s.mu.Lock()
	s.windows = w
	s.mu.Unlock()
}

// warm looks up the frames of every site's stack of m once, so that the
// first view that needs them finds them ready, and notes their files;
// then it makes the answers to the requests likely to come next.
func (s *Server) warm(m *analysis.Model) {
	s.sources = sourceFiles(m)
	close(s.warmed)
	// Then the views people open first after the timeline: the flame
	// graph both ways, the callers and the leaks.
	for _, q := range []url.Values{{"view": {"top-down"}}, {"view": {"summary"}, "top": {"50"}},
		{"view": {"bottom-up"}}, {"view": {"callers"}}} {
		s.viewAnswer(q)
	}
}

// sourceFiles returns the source files the stacks of m name, having
// looked up the frames of every one.
func sourceFiles(m *analysis.Model) map[string]bool {
	files := make(map[string]bool)
	for _, p := range m.Processes {
		for i := range p.Sites {
			for _, f := range p.SiteStack(&p.Sites[i]) {
				if f.File != "" {
					files[f.File] = true
				}
			}
		}
	}
	return files
}

// Compare makes the server compare its trace with the trace at path, of
// an older run (memtrail view -compare): /api/diff answers, and the UI
// shows the comparison. It is called before the server serves.
func (s *Server) Compare(path string) error {
	m, _, err := analysis.AnalyzeFile(path, analysis.Options{})
	if err != nil {
		return err
	}
	if len(m.Processes) == 0 {
		return fmt.Errorf("%s holds no process", path)
	}
	s.base, s.basePath, s.baseSources = m, path, sourceFiles(m)
	s.buildDirs = append(s.buildDirs, buildDirs(m)...)
	s.access, err = newSourceAccess(s.buildDirs, s.sourceDir)
	return err
}

// SourceDir makes the server read the relative names of source files
// under dir (memtrail view -source-dir), and any file under it. It is
// called before the server serves.
func (s *Server) SourceDir(dir string) error {
	a, err := newSourceAccess(s.buildDirs, dir)
	if err != nil {
		return err
	}
	s.access, s.sourceDir = a, dir
	return nil
}

// diff answers /api/diff: the comparison of the base trace's program with
// process pid of this one (default: its program).
func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	if s.base == nil {
		fail(w, http.StatusNotFound, errors.New("this server compares no traces: start it with memtrail view -compare OLD-TRACE TRACE"))
		return
	}
	id, err := processParam(r.URL.Query())
	if err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	key := "diff?" + r.URL.Query().Encode()
	s.mu.Lock()
	b, ok := s.answers.get(key)
	s.mu.Unlock()
	if !ok {
		_, newP, ok := s.process(w, id)
		if !ok {
			return
		}
		oldP, err := report.PickID(s.base, report.ProcessID{})
		if err != nil {
			fail(w, http.StatusInternalServerError, err)
			return
		}
		var out bytes.Buffer
		if err := report.DiffJSON(&out, oldP, newP, analysis.Compare(oldP, newP)); err != nil {
			fail(w, http.StatusInternalServerError, err)
			return
		}
		b = out.Bytes()
		s.mu.Lock()
		s.answers.put(key, b)
		s.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// model returns the analysis of the trace with opts, made or kept.
// Only the window, the length of the object lists, the heap map's cells,
// the threads and the stack filter may be set; filters names the last two
// (see filterKey).
func (s *Server) model(opts analysis.Options, filters string) (*analysis.Model, error) {
	key := modelKey{opts.From, opts.To, opts.Objects, opts.HeapMap, filters}
	s.mu.Lock()
	made, ok := s.models.get(key)
	if !ok {
		made = &madeModel{}
		s.models.put(key, made)
	}
	s.mu.Unlock()
	made.once.Do(func() {
		opts := analysis.Options{From: key.from, To: key.to, Objects: key.objects, HeapMap: key.heapMap,
			Threads: opts.Threads, Filter: opts.Filter}
		if key.to != 0 {
			// A window: its analysis stops reading at its end, and
			// takes the rest from the analysis of the whole trace.
			if opts.Stacks, made.err = s.model(analysis.Options{}, ""); made.err != nil {
				return
			}
		}
		s.mu.Lock()
		w := s.windows
		s.mu.Unlock()
		if w != nil {
			made.m, made.err = w.Analyze(opts)
			return
		}
		made.m, _, made.err = analysis.AnalyzeFile(s.path, opts)
	})
	return made.m, made.err
}

// Handler returns the handler of the UI and the API.
func (s *Server) Handler() http.Handler {
	ui, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded tree always has ui
	}
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(ui))
	mux.HandleFunc("GET /api/view", s.view)
	mux.HandleFunc("GET /api/source", s.source)
	mux.HandleFunc("GET /api/events", s.events)
	mux.HandleFunc("GET /api/status", s.status)
	mux.HandleFunc("GET /api/diff", s.diff)
	mux.HandleFunc("GET /api/export", s.download)
	return secured(s.guarded(mux))
}

// secured adds the headers that keep the page to itself: no script,
// style or request but its own, and no guessing of content types.
func secured(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// view answers /api/view.
func (s *Server) view(w http.ResponseWriter, r *http.Request) {
	b, status, err := s.viewAnswer(r.URL.Query())
	if err != nil {
		fail(w, status, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// viewAnswer returns the answer to a view request, kept or made, or the
// error and its status.
func (s *Server) viewAnswer(q url.Values) ([]byte, int, error) {
	key := q.Encode() // sorted by parameter
	s.mu.Lock()
	b, ok := s.answers.get(key)
	s.mu.Unlock()
	if ok {
		return b, http.StatusOK, nil
	}
	opts, aopts, err := viewOptions(q)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	m, err := s.model(aopts, filterKey(q))
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	var out bytes.Buffer
	if err := report.Write(&out, m, opts, true); err != nil {
		return nil, http.StatusBadRequest, err
	}
	s.mu.Lock()
	if _, ok := s.answers.get(key); !ok && out.Len() <= maxKeptAnswer { // another request may have made it
		s.answers.put(key, out.Bytes())
	}
	s.mu.Unlock()
	return out.Bytes(), http.StatusOK, nil
}

// viewOptions reads the parameters of a request for a view: those of
// memtrail report's flags, with times in ns after the process started.
func viewOptions(q url.Values) (report.Options, analysis.Options, error) {
	req := report.Request{View: q.Get("view"), Cost: "peak", Order: "size", Top: 10, Frames: 8, Chain: 5,
		Given: map[string]bool{}}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"cost", &req.Cost}, {"sort", &req.Order}, {"thread", &req.Threads}, {"function", &req.Function},
		{"file", &req.File}, {"module", &req.Module}, {"ignore", &req.Ignore}} {
		if v := q.Get(p.name); v != "" {
			*p.dst = v
		}
	}
	var nums [4]uint64
	for i, p := range []struct{ name, what string }{
		{"top", "a number"}, {"chain", "a number"}, {"from", "a time in ns"}, {"to", "a time in ns"},
	} {
		var err error
		if nums[i], req.Given[p.name], err = param(q, p.name, p.what); err != nil {
			return report.Options{}, analysis.Options{}, err
		}
	}
	if req.Given["top"] {
		req.Top = int(min(nums[0], 1<<31))
	}
	if req.Given["chain"] {
		req.Chain = int(min(nums[1], 1<<31))
	}
	req.From, req.To = time.Duration(min(nums[2], math.MaxInt64)), time.Duration(min(nums[3], math.MaxInt64))
	id, err := processParam(q)
	if err != nil {
		return report.Options{}, analysis.Options{}, err
	}
	opts, aopts, err := req.Options()
	opts.PID, opts.Image = id.PID, id.Image
	return opts, aopts, err
}

// filterParams are the parameters of a view request that select the
// blocks analyzed, as report's flags of those names do.
var filterParams = []string{"thread", "function", "file", "module", "ignore"}

// filterKey names the threads and stack filters of a view request: the
// requests of one key share their analyses.
func filterKey(q url.Values) string {
	f := url.Values{}
	for _, name := range filterParams {
		if v := q.Get(name); v != "" {
			f.Set(name, v)
		}
	}
	return f.Encode()
}

// param returns the value of the parameter name of q, a number, whether
// it is given, and an error saying that it must be what it is not.
func param(q url.Values, name, what string) (uint64, bool, error) {
	v := q.Get(name)
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%s=%q is not %s", name, v, what)
	}
	return n, true, nil
}

// processParam returns the process the parameter pid names, as report's
// -pid does: 1234, or 1234.2 for the second image of a pid that exec'd;
// none (the program itself) if not given.
func processParam(q url.Values) (report.ProcessID, error) {
	v := q.Get("pid")
	if v == "" {
		return report.ProcessID{}, nil
	}
	id, err := report.ParseProcessID(v)
	if err != nil {
		return id, fmt.Errorf("pid=%w", err)
	}
	return id, nil
}

// process returns the process id names, in the analysis of the whole
// trace, or answers with the error that keeps it from it.
func (s *Server) process(w http.ResponseWriter, id report.ProcessID) (*analysis.Model, *analysis.Process, bool) {
	m, err := s.model(analysis.Options{}, "")
	if err != nil {
		fail(w, http.StatusInternalServerError, err)
		return nil, nil, false
	}
	p, err := report.PickID(m, id)
	if err != nil {
		fail(w, http.StatusBadRequest, err)
		return nil, nil, false
	}
	return m, p, true
}

// status answers /api/status: whether the server's background work is
// done (the frames of the stacks looked up, the windows prepared), and
// how many checkpoints and stretches windows may start from or be put
// together from.
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	var st struct {
		Frames      bool   `json:"frames"`
		Checkpoints int    `json:"checkpoints"`
		Stretches   int    `json:"stretches"`
		Ready       bool   `json:"ready"`
		Compare     string `json:"compare"` // the trace compared with, if any
		// Limits are the bounds of what a request may ask for, which
		// the UI keeps to.
		Limits struct {
			Top    int `json:"top"`
			Frames int `json:"frames"`
			Chain  int `json:"chain"`
			Events int `json:"events"` // that /api/events lists
		} `json:"limits"`
		// Formats are those /api/export writes.
		Formats []downloadFormat `json:"formats"`
	}
	st.Compare = s.basePath
	st.Limits.Top, st.Limits.Frames, st.Limits.Chain, st.Limits.Events = report.MaxTop, report.MaxFrames, report.MaxChain, maxEvents
	st.Formats = downloadFormats()
	select {
	case <-s.warmed:
		st.Frames = true
	default:
	}
	select {
	case <-s.checkpointed:
		st.Ready = st.Frames
	default:
	}
	s.mu.Lock()
	if s.windows != nil {
		st.Checkpoints, st.Stretches = s.windows.Checkpoints(), s.windows.Stretches()
	}
	s.mu.Unlock()
	writeJSON(w, st)
}

// maxEvents is how many events /api/events lists.
const maxEvents = 200

// events answers /api/events: what happened in a stretch of the run, as a
// click on the timeline picks.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, fromGiven, err := param(q, "from", "a time in ns")
	to, toGiven, err2 := param(q, "to", "a time in ns")
	id, err3 := processParam(q)
	switch err := cmp.Or(err, err2, err3); {
	case err != nil:
		fail(w, http.StatusBadRequest, err)
		return
	case !fromGiven || !toGiven:
		fail(w, http.StatusBadRequest, errors.New("from and to, the ends of the stretch in ns, are both needed"))
		return
	case to < from:
		fail(w, http.StatusBadRequest, fmt.Errorf("to=%d is before from=%d", to, from))
		return
	}
	_, p, ok := s.process(w, id)
	if !ok {
		return
	}
	mo, err := analysis.EventsBetween(s.path, p, from, to, maxEvents)
	if err != nil {
		fail(w, http.StatusInternalServerError, err)
		return
	}
	var b bytes.Buffer
	if err := report.MomentJSON(&b, p, mo); err != nil {
		fail(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b.Bytes())
}

// source answers /api/source: a file the trace names, if the rules of
// sourceAccess let it be read.
func (s *Server) source(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Query().Get("path")
	<-s.warmed
	if !s.sources[path] && !s.baseSources[path] {
		fail(w, http.StatusForbidden, fmt.Errorf("%q is not a source file of this trace", path))
		return
	}
	b, cut, err := s.access.read(path)
	if err != nil {
		fail(w, sourceStatus(err), err)
		return
	}
	answer := struct {
		Path  string   `json:"path"`
		Lines []string `json:"lines"`
		// Cut is the bytes served of a file cut short, or 0.
		Cut int `json:"cut,omitempty"`
	}{Path: path, Lines: sourceLines(b, cut)}
	if cut {
		answer.Cut = maxSource
	}
	writeJSON(w, answer)
}

// fail answers with an error, as JSON.
func fail(w http.ResponseWriter, status int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(struct {
		Error string `json:"error"`
	}{err.Error()})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
