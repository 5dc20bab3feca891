package analysis

import "io"

// progressReader counts the bytes read from a file and reports them every
// percent of its size.
type progressReader struct {
	r           io.Reader
	done, total int64
	next        int64
	report      func(done, total int64)
}

// withProgress returns r, of size bytes, read through report (r itself if
// report is nil).
func withProgress(r io.Reader, size int64, report func(done, total int64)) io.Reader {
	if report == nil {
		return r
	}
	report(0, size)
	return &progressReader{r: r, total: size, next: size / 100, report: report}
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
