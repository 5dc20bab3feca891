package trace

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
)

// blockMagicBytes is blockMagic as it appears in the file.
var blockMagicBytes = []byte("MTBK")

// source reads blocks from the underlying reader. It keeps a window of
// unread bytes so that, after damage, it can scan forward for the next block
// and back off from candidates that turn out to be false.
type source struct {
	r      io.Reader
	buf    []byte // buf[start:] is unread data
	start  int
	offset int64 // file offset of buf[start]
	eof    bool  // r has no more data
	err    error // r failed with something other than io.EOF
}

// fetched is what reading ahead for the next block produced.
type fetched struct {
	damage  *DamageError // damage met before the block, reported first
	offset  int64        // file offset of the block
	found   bool         // a sound block was read
	streams streamSet    // its decoded streams, in buf
	buf     []byte
	atEnd   bool  // the file ended after damage, if any
	err     error // the underlying reader failed
}

// avail returns the unread bytes in the window.
func (s *source) avail() []byte { return s.buf[s.start:] }

func (s *source) advance(n int) {
	s.start += n
	s.offset += int64(n)
}

// fill tries to get at least n unread bytes into the window and reports
// whether it did. The window grows only as data actually arrives, so a
// length in a damaged header costs no memory the file does not back.
func (s *source) fill(n int) bool {
	for len(s.buf)-s.start < n {
		if s.eof || s.err != nil {
			return false
		}
		if s.start > 0 && cap(s.buf)-s.start < n {
			s.buf = s.buf[:copy(s.buf, s.buf[s.start:])]
			s.start = 0
		}
		if len(s.buf) == cap(s.buf) {
			grown := make([]byte, len(s.buf), max(64<<10, min(2*cap(s.buf), s.start+n)))
			copy(grown, s.buf)
			s.buf = grown
		}
		s.read()
	}
	return true
}

// read reads once into the free end of the window.
func (s *source) read() {
	for range 100 {
		m, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+m]
		switch {
		case errors.Is(err, io.EOF):
			s.eof = true
			return
		case err != nil:
			s.err = err
			return
		case m > 0:
			return
		}
	}
	// A reader that keeps returning nothing is broken; don't spin on it.
	s.err = io.ErrNoProgress
}

// next reads the next block and decodes its streams into buf. If the block
// is damaged, next reports the damage instead, and leaves the window at the
// next sound block or at the end of the file.
func (s *source) next(buf []byte) fetched {
	start := s.offset
	if !s.fill(blockHeaderSize) {
		if s.err != nil {
			return fetched{err: s.err}
		}
		if len(s.avail()) == 0 {
			return fetched{atEnd: true}
		}
	}
	h, stored, reason := s.check()
	if reason != "" {
		return s.resync(start, reason)
	}
	s.advance(blockHeaderSize + len(stored))
	streams, buf, reason := decodeStreams(h, stored, buf)
	if reason != "" {
		// The CRC held, so the extent of the block is right: skip just it.
		size := int64(blockHeaderSize + len(stored))
		return fetched{damage: &DamageError{Offset: start, BytesSkipped: size, Reason: reason}, buf: buf}
	}
	return fetched{offset: start, found: true, streams: streams, buf: buf}
}

// check checks the block at the start of the window: its header, that all
// of its payload is there, and its CRC. It returns the header and the stored
// payload, or why they are not right.
func (s *source) check() (blockHeader, []byte, string) {
	if !s.fill(blockHeaderSize) {
		if bytes.HasPrefix(blockMagicBytes, s.avail()[:min(len(s.avail()), 4)]) {
			return blockHeader{}, nil, truncatedReason
		}
		return blockHeader{}, nil, "bad block magic"
	}
	h, reason := parseBlockHeader(s.avail())
	if reason != "" {
		return h, nil, reason
	}
	if !s.fill(blockHeaderSize + int(h.stored)) {
		return h, nil, truncatedReason
	}
	stored := s.avail()[blockHeaderSize : blockHeaderSize+int(h.stored)]
	if crc32.Checksum(stored, castagnoli) != h.crc {
		return h, nil, "crc mismatch"
	}
	return h, stored, ""
}

// truncatedReason is why a block that runs past the end of the file is bad.
const truncatedReason = "last block incomplete"

// resync scans forward from the damaged block at offset start for the next
// block whose header and CRC check out.
//
//  1. Step one byte past the start of the damaged block: its length cannot be
//     trusted, so the next block may begin anywhere after it.
//  2. Look for the block magic in the window; if there is none, keep the last
//     three bytes (a magic may straddle the edge), read more and repeat.
//  3. Check the candidate's header and CRC; if they fail, step past it and go
//     on from 2.
//
// If the file ends first, everything from start on is lost.
func (s *source) resync(start int64, reason string) fetched {
	s.advance(1)
	for {
		i := bytes.Index(s.avail(), blockMagicBytes)
		if i < 0 {
			keep := min(len(s.avail()), len(blockMagicBytes)-1)
			s.advance(len(s.avail()) - keep)
			if !s.fill(keep + 1) {
				return s.lostTail(start, reason)
			}
			continue
		}
		s.advance(i)
		if _, _, bad := s.check(); bad == "" {
			break
		}
		s.advance(1)
	}
	if reason == truncatedReason {
		reason = "block length runs past the end of the file"
	}
	return fetched{damage: &DamageError{Offset: start, BytesSkipped: s.offset - start, Reason: reason}}
}

// lostTail reports that nothing from start to the end of the file could be
// read.
func (s *source) lostTail(start int64, reason string) fetched {
	s.advance(len(s.avail()))
	if s.err != nil {
		return fetched{err: s.err}
	}
	d := &DamageError{Offset: start, BytesSkipped: s.offset - start, Reason: reason}
	d.Truncated = reason == truncatedReason
	return fetched{damage: d, atEnd: true}
}
