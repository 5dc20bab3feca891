package trace

import (
	"encoding/binary"
	"fmt"
)

// decoder reads the fields of records from a block's records stream, or
// of its stream table. Instead of returning an error from every field it
// remembers the first failure and makes all later fields read as zero, so
// a record is checked once, after all of its fields are read.
type decoder struct {
	p   []byte
	i   int
	bad string // why decoding failed; empty while it has not
}

const errPastEnd = "runs past the end of the block"

func (d *decoder) fail(why string) {
	if d.bad == "" {
		d.bad = why
	}
	d.i = len(d.p)
}

// uv reads an unsigned varint. Most fields fit in one byte; that case is
// kept small enough to be inlined.
func (d *decoder) uv() uint64 {
	if d.i < len(d.p) {
		if b := d.p[d.i]; b < 0x80 {
			d.i++
			return uint64(b)
		}
	}
	return d.uvSlow()
}

func (d *decoder) uvSlow() uint64 {
	// Two bytes are common too: the counts of Events records, time
	// steps at fine time units.
	if i := d.i; i+1 < len(d.p) && d.p[i+1] < 0x80 {
		d.i = i + 2
		return uint64(d.p[i]&0x7f) | uint64(d.p[i+1])<<7
	}
	v, n := binary.Uvarint(d.p[d.i:])
	switch {
	case n == 0:
		d.fail(errPastEnd)
		return 0
	case n < 0:
		d.fail("varint overflows 64 bits")
		return 0
	}
	d.i += n
	return v
}

// enum reads an unsigned varint that must fit in a byte: the enums stored
// this way (EndHow, SymbolStatus) are uint8s.
func (d *decoder) enum() uint8 {
	v := d.uv()
	if v > 0xff {
		d.fail(fmt.Sprintf("value %d out of range", v))
		return 0
	}
	return uint8(v)
}

// sv reads a zigzag-encoded signed varint.
func (d *decoder) sv() int64 {
	u := d.uv()
	return int64(u>>1) ^ -int64(u&1)
}

func (d *decoder) u8() byte {
	if d.i >= len(d.p) {
		d.fail(errPastEnd)
		return 0
	}
	b := d.p[d.i]
	d.i++
	return b
}

// bytes reads a length-prefixed byte string. The result aliases the stream.
func (d *decoder) bytes() []byte {
	n := d.uv()
	if n > uint64(len(d.p)-d.i) {
		d.fail(fmt.Sprintf("length %d %s", n, errPastEnd))
		return nil
	}
	b := d.p[d.i : d.i+int(n)]
	d.i += int(n)
	return b
}

func (d *decoder) str() string { return string(d.bytes()) }

// body reads the length of a skippable record and returns a decoder of
// the body that follows, moving d past it.
func (d *decoder) body() decoder {
	n := d.uv()
	if n > uint64(len(d.p)-d.i) {
		d.fail(fmt.Sprintf("length %d %s", n, errPastEnd))
		return decoder{}
	}
	body := decoder{p: d.p[d.i : d.i+int(n)]}
	d.i += int(n)
	return body
}

// bodyRead reports the damage of a skippable record whose fields, read
// from body, ran past its length.
func (d *decoder) bodyRead(body *decoder) {
	if body.bad != "" {
		d.fail(fmt.Sprintf("its fields do not fit in its length of %d bytes", len(body.p)))
	}
}

// nextAddr reads the address of item i of a list of addresses that
// strictly increase, as a delta from prev (the first from 0); an address
// out of order is damage, and ok false.
func (d *decoder) nextAddr(body *decoder, i int, prev uint64) (addr uint64, ok bool) {
	delta := body.uv()
	addr = prev + delta
	if i > 0 && delta == 0 || addr < prev {
		d.fail(fmt.Sprintf("block %d at 0x%x is not after 0x%x", i, addr, prev))
		return addr, false
	}
	return addr, true
}

// bytesCopy reads a length-prefixed byte string into memory of its own; an
// empty one is nil.
func (d *decoder) bytesCopy() []byte {
	b := d.bytes()
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// count reads the number of items of a list whose items take at least size
// bytes each. A count the rest of the block cannot hold is damage; checking
// it here keeps a damaged count from becoming a giant allocation.
func (d *decoder) count(size int) int {
	n := d.uv()
	if n > uint64((len(d.p)-d.i)/size) {
		d.fail(fmt.Sprintf("count %d %s", n, errPastEnd))
		return 0
	}
	return int(n)
}

func (d *decoder) strs() []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

// The functions below read varints for the event streams, whose positions
// live apart from their bytes. A failure sets i past len(p), and every
// later read then fails too, so the caller checks once at the end.

// uvarint reads an unsigned varint at p[i], trying the common one-byte case
// first.
func uvarint(p []byte, i int) (uint64, int) {
	if i < len(p) {
		if b := p[i]; b < 0x80 {
			return uint64(b), i + 1
		}
	}
	return uvarintLong(p, i)
}

// uvarintLong reads a varint of any length, rejecting those that run past
// the end of p or do not fit in 64 bits.
func uvarintLong(p []byte, i int) (uint64, int) {
	if i >= len(p) {
		return 0, len(p) + 1
	}
	var v uint64
	var shift uint
	for n, b := range p[i:] {
		if b < 0x80 {
			if n == binary.MaxVarintLen64-1 && b > 1 {
				break
			}
			return v | uint64(b)<<shift, i + n + 1
		}
		if n == binary.MaxVarintLen64-1 {
			break
		}
		v |= uint64(b&0x7f) << shift
		shift += 7
	}
	return 0, len(p) + 1
}

func unzigzag(u uint64) uint64 { return uint64(int64(u>>1) ^ -int64(u&1)) }
