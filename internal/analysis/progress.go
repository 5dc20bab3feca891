package analysis

import (
	"io"
	"os"
)

// progressReader counts the bytes read from a file and reports them every
// percent of its size.
type progressReader struct {
	r           io.Reader
	done, total int64
	next        int64
	report      func(done, total int64)
}

// withProgress returns f read through report (f itself if report is nil).
func withProgress(f *os.File, report func(done, total int64)) io.Reader {
	if report == nil {
		return f
	}
	var total int64
	if st, err := f.Stat(); err == nil {
		total = st.Size()
	}
	report(0, total)
	return &progressReader{r: f, total: total, next: total / 100, report: report}
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.done += int64(n)
	if p.done >= p.next {
		p.report(min(p.done, p.total), p.total)
		p.next = p.done + max(p.total/100, 1)
	}
	return n, err
}
