package trace

import "fmt"

// eventStreams are the event streams of a block and how far each has been
// decoded.
//
// Where events are decoded one by one (blockDecoder.event), the values
// of the varint columns are decoded ahead, a run of them at a time, by a
// loop with no branch on whether a value has a tail (which is as random as
// the sizes and handles are), and read with a branch that is nearly
// always taken (value). On the malloc-dense benchmark, that made decoding
// 4% faster than reading each value from its stream. The streams'
// positions are then past values not read yet, until sync moves them
// back.
type eventStreams struct {
	c     [numStreams]column        // c[streamRecords] is not used here
	bad   bool                      // a read ran past the end of a stream or over 64 bits
	ahead [numColumns]decodedValues // of column columnStream(i)
}

// decodedValues are values of a varint column decoded ahead: vals[next:n]
// are yet to be read.
type decodedValues struct {
	vals    [decodedAhead]uint64
	next, n int
	// from and tailsFrom are the positions of the column and of its tails
	// at vals[0].
	from, tailsFrom int
}

// decodedAhead is how many values of a column are decoded at a time.
const decodedAhead = 128

// value reads the next value of the varint column k. In the hot loop,
// callers use decoded(k).take and decodeAhead instead: value is too big to
// be inlined, and those are the two halves of it.
func (s *eventStreams) value(k int) uint64 {
	if v, ok := s.decoded(k).take(); ok {
		return v
	}
	return s.decodeAhead(k)
}

// decoded returns the values of the varint column k decoded ahead.
func (s *eventStreams) decoded(k int) *decodedValues { return &s.ahead[columnIndex(k)] }

// take reads the next value decoded ahead, if there is one.
func (a *decodedValues) take() (uint64, bool) {
	if i := a.next; i < a.n {
		a.next = i + 1
		return a.vals[i&(decodedAhead-1)], true // the mask spares a bounds check: i < n <= decodedAhead
	}
	return 0, false
}

// decodeAhead decodes the next values of column k, and returns the first.
// It decodes values of one or two bytes, nearly all of them; a longer one,
// or a read past the end of a stream, is left to uv, as is the damage it
// may find.
func (s *eventStreams) decodeAhead(k int) uint64 {
	a := &s.ahead[columnIndex(k)]
	c, tails := &s.c[k], &s.c[tailOf(k)]
	a.from, a.tailsFrom = c.i, tails.i
	n, i, j := decodeShort(&a.vals, c.p, tails.p, c.i, tails.i)
	c.i, tails.i = i, j
	if n == 0 {
		a.next, a.n = 0, 0
		return s.uv(k)
	}
	a.next, a.n = 1, n
	return a.vals[0]
}

// decodeShort decodes into vals the values of one or two bytes of a
// varint column from p[i:], their tails from tp[j:]. It stops before the
// first longer value, and where a stream ends. It returns how many values it
// decoded and the positions after them. (It is a function of its own so
// that the compiler keeps all it needs in registers.)
func decodeShort(vals *[decodedAhead]uint64, p, tp []byte, i, j int) (n, pi, tj int) {
	for n < len(vals) && i < len(p) && j < len(tp) {
		low, tail := uint64(p[i]), uint64(tp[j])
		long := low >> 7 // 1 if the value has a tail, which is tail if long is 1
		if tail>>7&long != 0 {
			return n, i, j // a tail of more than a byte
		}
		vals[n] = low&0x7f | tail<<7&-long
		i++
		j += int(long)
		n++
	}
	// The tails have run out: values without one may still come. The
	// loop over them has one bound, so that it tests a byte a value.
	if n >= len(vals) || i >= len(p) {
		return n, i, j
	}
	rest := p[i:min(len(p), i+len(vals)-n)]
	dst := vals[n : n+len(rest)]
	k := 0
	for ; k < len(rest) && rest[k] < 0x80; k++ {
		dst[k] = uint64(rest[k])
	}
	return n + k, i + k, j
}

// sync moves the positions of the varint columns and their tails back to
// the first value not read yet, and forgets the values decoded ahead.
func (s *eventStreams) sync() {
	for k := range s.ahead {
		a := &s.ahead[k]
		if a.next < a.n {
			c, tails := &s.c[columnStream(k)], &s.c[tailOf(columnStream(k))]
			i, j := a.from, a.tailsFrom
			for range a.next {
				if c.p[i] >= 0x80 {
					j++
				}
				i++
			}
			c.i, tails.i = i, j
		}
		a.next, a.n = 0, 0
	}
}

// positions returns the positions of the streams, for setPositions to
// go back to.
func (s *eventStreams) positions() [numStreams]int {
	var at [numStreams]int
	for k := range s.c {
		at[k] = s.c[k].i
	}
	return at
}

func (s *eventStreams) setPositions(at [numStreams]int) {
	for k := range s.c {
		s.c[k].i = at[k]
	}
}

// columnAt returns the bytes and the position of the varint column k and
// of its tails, for a loop over the column to keep in registers (see
// shortVarint), and setColumnAt stores the positions back.
func (s *eventStreams) columnAt(k int) (p, tails []byte, i, j int) {
	return s.c[k].p, s.c[tailOf(k)].p, s.c[k].i, s.c[tailOf(k)].i
}

func (s *eventStreams) setColumnAt(k int, i, j int) {
	s.c[k].i, s.c[tailOf(k)].i = i, j
}

// shortVarint reads the value of a varint column at p[i], and its tail
// at tails[j], if it takes one or two bytes, as nearly all do; otherwise
// it returns false, for the caller to call longVarint. It has no branch
// on whether the value has a tail, which is as random as the sizes and
// handles are, and is small enough to be inlined.
func shortVarint(p, tails []byte, i, j int) (v uint64, ni, nj int, ok bool) {
	if i < len(p) {
		low, tail := uint64(p[i]), uint64(0x80) // a tail too long, if there is none
		if j < len(tails) {
			tail = uint64(tails[j])
		}
		long := low >> 7 // 1 if the value has a tail, which is tail if long is 1
		if tail>>7&long == 0 {
			return low&0x7f | tail<<7&-long, i + 1, j + int(long), true
		}
	}
	return 0, i, j, false
}

// longVarint reads the value of a varint column at p[i], and its tail at
// tails[j], whatever its length, where the tails may have run out. It
// returns false if the column runs out or the value does not fit in 64
// bits.
func longVarint(p, tails []byte, i, j int) (v uint64, ni, nj int, ok bool) {
	if i >= len(p) {
		return 0, i, j, false
	}
	low := uint64(p[i])
	if low < 0x80 {
		return low, i + 1, j, true
	}
	tail, nj := uvarint(tails, j)
	if nj > len(tails) || tail >= 1<<(64-7) {
		return 0, i, j, false
	}
	return low&0x7f | tail<<7, i + 1, nj, true
}

// column is an event stream and how far it has been decoded.
type column struct {
	p []byte
	i int
}

// small reads the next value of the column if it fits in its one byte,
// which most do: small is cheap enough to be inlined, and the caller
// calls eventStreams.uvLong for the others.
func (c *column) small() (uint64, bool) {
	if i := c.i; i < len(c.p) && c.p[i] < 0x80 {
		c.i = i + 1
		return uint64(c.p[i]), true
	}
	return 0, false
}

// left returns how many bytes of the stream are left.
func (c *column) left() int { return max(0, len(c.p)-c.i) }

// uv reads a value of the varint column k from its stream, at its
// position, when no values are decoded ahead.
func (s *eventStreams) uv(k int) uint64 {
	if v, ok := s.c[k].small(); ok {
		return v
	}
	return s.uvLong(k)
}

// uvLong reads a value of column k that goes on in its tails, or fails. A
// failure leaves the position of the stream at fault past its end, for
// overrun to find.
func (s *eventStreams) uvLong(k int) uint64 {
	c, tails := &s.c[k], &s.c[tailOf(k)]
	if c.i >= len(c.p) {
		c.i, s.bad = len(c.p)+1, true
		return 0
	}
	low := uint64(c.p[c.i] & 0x7f)
	c.i++
	if j := tails.i; j < len(tails.p) && tails.p[j] < 0x80 {
		// A tail of one byte, as most are: a value below 2^14.
		tails.i = j + 1
		return low | uint64(tails.p[j])<<7
	}
	tail, j := uvarint(tails.p, tails.i)
	if j > len(tails.p) || tail >= 1<<(64-7) {
		tails.i, s.bad = len(tails.p)+1, true
		return 0
	}
	tails.i = j
	return low | tail<<7
}

// skipEvent moves past an event that decoded without damage before. (It
// reads with uv: the streams are rewound, and nothing is decoded ahead.)
func (s *eventStreams) skipEvent() {
	ops := &s.c[streamOps]
	op := ops.p[ops.i]
	ops.i++
	kind := op >> opShift
	if kind == opFree || kind == opRealloc {
		if s.uv(streamRef) == 0 {
			s.uv(streamRawAddr)
		}
	}
	if kind == opAlloc || kind == opRealloc {
		s.uv(streamSize)
		switch s.uv(streamAddr) {
		case addrEscape:
			s.uv(streamRawAddr)
		case addrSource:
			s.uv(streamAddr)
		}
	}
	s.uv(streamStack)
	if s.hasStackUse() {
		s.uv(streamStackUse)
	}
}

// hasStackUse reports whether the block's events have a stack-use value:
// its stack-use column is not empty (it is in blocks of version 1).
func (s *eventStreams) hasStackUse() bool { return len(s.c[streamStackUse].p) > 0 }

// overrun says which stream a failed read ran past the end of.
func (s *eventStreams) overrun() string {
	for k := streamOps; k < numStreams; k++ {
		if s.c[k].i > len(s.c[k].p) {
			return fmt.Sprintf("the %s stream runs out or holds a varint of more than 64 bits", streamNames[k])
		}
	}
	return ""
}

// unread returns how many bytes of the event streams are left.
func (s *eventStreams) unread() int {
	s.sync()
	n := 0
	for k := streamOps; k < numStreams; k++ {
		n += s.c[k].left()
	}
	return n
}

// skip gives up on the rest of the event streams.
func (s *eventStreams) skip() {
	for k := range s.ahead {
		s.ahead[k].next, s.ahead[k].n = 0, 0
	}
	for k := range s.c {
		s.c[k].i = len(s.c[k].p)
	}
}

// rewind goes back to the start of the streams.
func (s *eventStreams) rewind() {
	s.sync()
	for k := range s.c {
		s.c[k].i = 0
	}
	s.bad = false
}
