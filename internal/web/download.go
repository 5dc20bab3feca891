package web

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/export"
)

// downloadFormat is an export format as the UI offers it.
type downloadFormat struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
	// Cost says that the format weighs stacks by a cost, the parameter cost.
	Cost bool `json:"cost"`
	// WholePID says that the format writes every image of a pid (its
	// tables say which), so that its pid takes no image.
	WholePID bool `json:"whole_pid"`
}

// downloadFormats lists the formats of package export for the UI.
func downloadFormats() []downloadFormat {
	list := make([]downloadFormat, len(export.Formats))
	for i, f := range export.Formats {
		list[i] = downloadFormat{f.Name, f.Summary, slices.Contains(f.Options, "cost"), f.Tables != nil}
	}
	return list
}

// download answers /api/export?format=F: the trace in the format of
// another tool, as memtrail export -format F writes it (pprof: in use at
// exit; collapsed: by cost, peak by default; parquet: its two tables in a
// zip), as a file to save. The file is made whole before it is sent, so
// that an error is an error, not a cut file.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := export.FormatNamed(q.Get("format"))
	if err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	id, err := processParam(q)
	if err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	if f.Tables != nil && id.Image != 0 {
		fail(w, http.StatusBadRequest, fmt.Errorf("pid=%s: format %s writes every image of a pid, so pid takes a pid alone", id, f.Name))
		return
	}
	cost, err := analysis.ParseCost(cmp.Or(q.Get("cost"), "peak"))
	if err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	m, p, ok := s.process(w, id)
	if !ok {
		return
	}
	tmp, err := os.CreateTemp("", "memtrail-export-")
	if err != nil {
		fail(w, http.StatusInternalServerError, err)
		return
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	bw := bufio.NewWriter(tmp)
	job := export.Job{Trace: s.path, Model: m, Process: p, PID: id.PID, Cost: cost}
	if err := f.Write(bw, job); err != nil {
		fail(w, http.StatusInternalServerError, fmt.Errorf("exporting as %s: %w", f.Name, err))
		return
	}
	if err := bw.Flush(); err != nil {
		fail(w, http.StatusInternalServerError, fmt.Errorf("exporting as %s: %w", f.Name, err))
		return
	}
	name := strings.TrimSuffix(filepath.Base(s.path), ".mtr")
	if id.PID != 0 {
		name += "." + id.String()
	}
	if slices.Contains(f.Options, "cost") {
		name += "." + cost.String()
	}
	w.Header().Set("Content-Type", f.ContentType)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name + f.Suffix}))
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		fail(w, http.StatusInternalServerError, err)
		return
	}
	io.Copy(w, tmp)
}
