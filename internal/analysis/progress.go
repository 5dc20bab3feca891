package analysis

import (
	"io"
	"math"
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

// withProgress returns a reader of f from its start, through report if it
// is not nil. The reader is f's alone: it reads with ReadAt, so that a
// Reader's read-ahead, which may read on after its analysis is done, does
// not take what the next analysis of f reads.
func withProgress(f *os.File, report func(done, total int64)) io.Reader {
	r := io.NewSectionReader(f, 0, math.MaxInt64)
	if report == nil {
		return r
	}
	var total int64
	if st, err := f.Stat(); err == nil {
		total = st.Size()
	}
	report(0, total)
	return &progressReader{r: r, total: total, next: total / 100, report: report}
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
