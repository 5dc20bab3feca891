package web

import (
	"archive/zip"
	"bufio"
	"cmp"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
	"github.com/memtrail/memtrail/internal/export"
	"github.com/memtrail/memtrail/internal/report"
	"github.com/memtrail/memtrail/internal/trace"
)

// downloadFormat is a format of memtrail export that /api/export writes,
// with the name its file gets after the trace's.
type downloadFormat struct {
	name, suffix, contentType string
	write                     func(s *Server, w io.Writer, p *analysis.Process, q downloadQuery) error
}

// downloadQuery is what a request for an export asks besides its format.
type downloadQuery struct {
	pid  uint64
	cost analysis.Cost
}

var downloadFormats = []downloadFormat{
	{"pprof", ".pb.gz", "application/gzip", func(s *Server, w io.Writer, p *analysis.Process, _ downloadQuery) error {
		m, err := s.model(analysis.Options{}, "")
		if err != nil {
			return err
		}
		return export.PProf(w, m.Info, p, export.InUseAtExit())
	}},
	{"massif", ".massif.out", "text/plain; charset=utf-8", func(_ *Server, w io.Writer, p *analysis.Process, _ downloadQuery) error {
		return export.Massif(w, p)
	}},
	{"collapsed", ".folded", "text/plain; charset=utf-8", func(_ *Server, w io.Writer, p *analysis.Process, q downloadQuery) error {
		return export.Collapsed(w, p, q.cost)
	}},
	{"parquet", ".parquet.zip", "application/zip", func(s *Server, w io.Writer, _ *analysis.Process, q downloadQuery) error {
		return s.parquetZip(w, q.pid)
	}},
}

// download answers /api/export?format=F: the trace in the format of
// another tool, as memtrail export -format F writes it (pprof: in use at
// exit; collapsed: by cost, peak by default; parquet: its two tables in a
// zip), as a file to save. The file is made whole before it is sent, so
// that an error is an error, not a cut file.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var f *downloadFormat
	var names []string
	for i := range downloadFormats {
		names = append(names, downloadFormats[i].name)
		if downloadFormats[i].name == q.Get("format") {
			f = &downloadFormats[i]
		}
	}
	if f == nil {
		fail(w, http.StatusBadRequest, fmt.Errorf("format=%q: the formats are %s", q.Get("format"), strings.Join(names, ", ")))
		return
	}
	var dq downloadQuery
	var err error
	if dq.pid, _, err = param(q, "pid", "a process id"); err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	if dq.cost, err = analysis.ParseCost(cmp.Or(q.Get("cost"), "peak")); err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	m, err := s.model(analysis.Options{}, "")
	if err != nil {
		fail(w, http.StatusInternalServerError, err)
		return
	}
	p, err := report.Pick(m, dq.pid)
	if err != nil {
		fail(w, http.StatusBadRequest, err)
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
	if err := f.write(s, bw, p, dq); err != nil {
		fail(w, http.StatusInternalServerError, fmt.Errorf("exporting as %s: %w", f.name, err))
		return
	}
	if err := bw.Flush(); err != nil {
		fail(w, http.StatusInternalServerError, fmt.Errorf("exporting as %s: %w", f.name, err))
		return
	}
	name := strings.TrimSuffix(filepath.Base(s.path), ".mtr")
	if dq.pid != 0 {
		name += fmt.Sprintf(".%d", dq.pid)
	}
	if f.name == "collapsed" {
		name += "." + dq.cost.String()
	}
	w.Header().Set("Content-Type", f.contentType)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name + f.suffix}))
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		fail(w, http.StatusInternalServerError, err)
		return
	}
	io.Copy(w, tmp)
}

// parquetZip writes the Parquet tables of process pid of the trace (0:
// all of them, as memtrail export does) into a zip: events.parquet and
// stacks.parquet.
func (s *Server) parquetZip(w io.Writer, pid uint64) error {
	dir, err := os.MkdirTemp("", "memtrail-parquet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tf, err := os.Open(s.path)
	if err != nil {
		return err
	}
	defer tf.Close()
	r, err := trace.NewReader(bufio.NewReaderSize(tf, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", s.path, err)
	}
	m, err := s.model(analysis.Options{}, "")
	if err != nil {
		return err
	}
	tables := []string{"events.parquet", "stacks.parquet"}
	var files [2]*os.File
	for i, t := range tables {
		if files[i], err = os.Create(filepath.Join(dir, t)); err != nil {
			return err
		}
		defer files[i].Close()
	}
	ew, sw := bufio.NewWriter(files[0]), bufio.NewWriter(files[1])
	if _, err := export.Parquet(ew, sw, r, m, pid); err != nil {
		return err
	}
	if err := ew.Flush(); err != nil {
		return err
	}
	if err := sw.Flush(); err != nil {
		return err
	}
	zw := zip.NewWriter(w)
	for i, t := range tables {
		if _, err := files[i].Seek(0, io.SeekStart); err != nil {
			return err
		}
		// Parquet is compressed already: stored, not deflated.
		e, err := zw.CreateHeader(&zip.FileHeader{Name: t, Method: zip.Store})
		if err != nil {
			return err
		}
		if _, err := io.Copy(e, files[i]); err != nil {
			return err
		}
	}
	return zw.Close()
}
