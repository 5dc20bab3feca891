package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/report"
)

// exported are the requests whose answers a page written by WriteHTML
// holds: what the UI asks for to show the header, the timeline, the flame
// graph (by every cost, and inverted) and the leaks of a process, with no
// window. The UI reads them from the page instead of asking the server.
func exported(id report.ProcessID) []string {
	var paths []string
	add := func(view, params string) {
		p := "/api/view?view=" + view
		if id.PID != 0 {
			p += "&pid=" + id.String()
		}
		paths = append(paths, p+params)
	}
	add("summary", "&top=50")
	add("timeline", "")
	add("leaks", "")
	for _, tree := range []string{"top-down", "bottom-up"} {
		for c := analysis.CostAllocations; c <= analysis.CostTemporary; c++ {
			if c == analysis.CostPeak {
				add(tree, "") // the UI's default: no cost in the request
			} else {
				add(tree, "&cost="+c.String())
			}
		}
	}
	return paths
}

// WriteHTML writes one self-contained HTML page of process id of the
// trace at path (the zero ID: the program itself), to attach to a CI run or send to
// someone: the UI, its script and style inlined, with the answers to the
// requests of its timeline, flame graph and leaks inside it. It needs no
// server and nothing from the network.
func WriteHTML(w io.Writer, path string, id report.ProcessID) error {
	s, _, err := open(path)
	if err != nil {
		return err
	}
	data := make(map[string]json.RawMessage)
	for _, path := range exported(id) {
		q, err := url.ParseQuery(strings.TrimPrefix(path, "/api/view?"))
		if err != nil {
			return err
		}
		b, _, err := s.viewAnswer(q)
		if err != nil {
			return err
		}
		data[path] = json.RawMessage(bytes.TrimSpace(b))
	}
	// encoding/json writes <, > and & as \u escapes: nothing in the data
	// can end the script element that holds it.
	blob, err := json.Marshal(data)
	if err != nil {
		return err
	}
	page, err := fs.ReadFile(uiFiles, "ui/index.html")
	if err != nil {
		return err
	}
	script, err := fs.ReadFile(uiFiles, "ui/app.js")
	if err != nil {
		return err
	}
	style, err := fs.ReadFile(uiFiles, "ui/style.css")
	if err != nil {
		return err
	}
	if bytes.Contains(bytes.ToLower(script), []byte("</script")) || bytes.Contains(bytes.ToLower(style), []byte("</style")) {
		return fmt.Errorf("the UI's script or style would end its own element")
	}
	html := string(page)
	for _, r := range []struct{ tag, inline string }{
		{`<link rel="stylesheet" href="style.css">`, "<style>\n" + string(style) + "</style>"},
		{`<script src="app.js"></script>`, `<script id="memtrail-data" type="application/json">` + string(blob) +
			"</script>\n<script>\n" + string(script) + "</script>"},
	} {
		if !strings.Contains(html, r.tag) {
			return fmt.Errorf("the UI's index.html has no %s", r.tag)
		}
		html = strings.Replace(html, r.tag, r.inline, 1)
	}
	_, err = io.WriteString(w, html)
	return err
}
