package trace

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// castagnoli is the CRC-32C table that block checksums use.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// blockHeader is the fixed header in front of every block's payload.
type blockHeader struct {
	layout uint8
	stored uint32 // payload bytes in the file
	raw    uint32 // the sum of the raw lengths of the payload's streams
	crc    uint32 // CRC-32C of the stored payload
}

func (h blockHeader) appendTo(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, blockMagic)
	dst = append(dst, h.layout, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, h.stored)
	dst = binary.LittleEndian.AppendUint32(dst, h.raw)
	return binary.LittleEndian.AppendUint32(dst, h.crc)
}

// parseBlockHeader decodes b[:blockHeaderSize] and checks everything in it
// that can be checked without the payload. A sound writer stores a stream
// raw whenever compression would not make it smaller, so the payload is at
// most the streams' raw length plus the stream table: that bounds what a
// reader reads for a header it cannot trust yet.
func parseBlockHeader(b []byte) (blockHeader, string) {
	if binary.LittleEndian.Uint32(b) != blockMagic {
		return blockHeader{}, "bad block magic"
	}
	h := blockHeader{
		layout: b[4],
		stored: binary.LittleEndian.Uint32(b[8:]),
		raw:    binary.LittleEndian.Uint32(b[12:]),
		crc:    binary.LittleEndian.Uint32(b[16:]),
	}
	switch {
	case b[5] != 0 || b[6] != 0 || b[7] != 0:
		return h, "bad block header: reserved bytes are not zero"
	case h.layout != layoutStreams:
		return h, fmt.Sprintf("bad block header: unknown layout %d", h.layout)
	case h.raw > maxBlockRaw:
		return h, fmt.Sprintf("bad block header: raw length %d exceeds the limit", h.raw)
	case h.stored > h.raw+maxStreamTable:
		return h, fmt.Sprintf("bad block header: stored length %d exceeds raw length %d and a stream table", h.stored, h.raw)
	}
	return h, ""
}

// streamSet holds the streams of a block, decoded.
type streamSet [numStreams][]byte

// rawLen returns the sum of the lengths of the streams.
func (s *streamSet) rawLen() int {
	n := 0
	for _, b := range s {
		n += len(b)
	}
	return n
}

// minCompressed is the shortest stream worth compressing: a zstd frame
// costs a dozen bytes before it saves any.
const minCompressed = 64

// parallelCompressed is the shortest stream that appendBlock compresses in
// a goroutine of its own, beside the others: a Flush or a Close waits for
// the last block, and its big streams then compress on every core.
const parallelCompressed = 256 << 10

// appendBlock appends a whole block (header and payload) holding the
// streams to dst. With compress set it compresses each stream that is long
// enough and keeps the result only if it is smaller; scratch is memory to
// compress into, and appendBlock returns it for reuse. Streams left empty
// at the end of the set are left out of the table.
func appendBlock(dst []byte, s *streamSet, compress bool, scratch []byte) ([]byte, []byte) {
	start := len(dst)
	dst = append(dst, make([]byte, blockHeaderSize)...)
	n := numStreams
	for n > 0 && len(s[n-1]) == 0 {
		n--
	}
	if n > 0 {
		dst = binary.AppendUvarint(dst, uint64(n))
	}
	var packed [numStreams][]byte // the big streams, compressed
	var wg sync.WaitGroup
	if compress {
		for i, raw := range s[:n] {
			if len(raw) >= parallelCompressed {
				wg.Go(func() { packed[i] = zstdEncoder().EncodeAll(raw, getBuffer(len(raw))) })
			}
		}
	}
	for i, raw := range s[:n] {
		stored, encoding := raw, byte(encodingRaw)
		if compress && len(raw) >= minCompressed {
			if len(raw) >= parallelCompressed {
				wg.Wait()
				scratch, packed[i] = packed[i], scratch
			} else {
				scratch = zstdEncoder().EncodeAll(raw, scratch[:0])
			}
			if len(scratch) < len(raw) {
				stored, encoding = scratch, encodingZstd
			}
		}
		dst = binary.AppendUvarint(dst, uint64(len(raw)))
		dst = binary.AppendUvarint(dst, uint64(len(stored)))
		dst = append(dst, encoding)
		dst = append(dst, stored...)
	}
	for _, b := range packed {
		if b != nil {
			putBuffer(b)
		}
	}
	payload := dst[start+blockHeaderSize:]
	h := blockHeader{layout: layoutStreams, raw: uint32(s.rawLen()), stored: uint32(len(payload)),
		crc: crc32.Checksum(payload, castagnoli)}
	h.appendTo(dst[start:start])
	return dst, scratch
}

// The zstd encoder and decoder are shared by all Writers and Readers: both
// are safe for concurrent use, and building one is costly.
var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderCRC(false), // blocks carry their own CRC-32C
			// A single segment frame always gives its content size, which
			// readers check against the stream table.
			zstd.WithSingleSegment(true),
			// Handles and sizes are varints with few repeats: entropy
			// coding of literals is where most of the gain is.
			zstd.WithAllLitEntropyCompression(true),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)))
		if err != nil {
			panic(fmt.Sprintf("trace: building zstd encoder: %v", err))
		}
		return enc
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		dec, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(0),
			zstd.WithDecoderMaxMemory(maxBlockRaw),
			zstd.WithDecoderMaxWindow(maxBlockRaw))
		if err != nil {
			panic(fmt.Sprintf("trace: building zstd decoder: %v", err))
		}
		return dec
	})
)

// decodeStreams decodes the streams of a block's stored payload into buf,
// reusing its memory. It returns the streams, which alias buf, and the
// buffer, or why the payload is damaged.
func decodeStreams(h blockHeader, payload, buf []byte) (streamSet, []byte, string) {
	var streams streamSet
	table, n, reason := parseStreamTable(h, payload)
	if reason != "" {
		return streams, buf, reason
	}
	// Every stream now has a raw length that adds up to the header's and
	// that its stored bytes or its frame header (both under the CRC)
	// vouch for.
	if cap(buf) < int(h.raw) {
		buf = make([]byte, 0, h.raw)
	}
	buf = buf[:0]
	for i, t := range table[:n] {
		start := len(buf)
		if t.encoding == encodingRaw {
			buf = append(buf, t.stored...)
		} else {
			var err error
			if buf, err = zstdDecoder().DecodeAll(t.stored, buf); err != nil {
				return streams, buf, fmt.Sprintf("%s stream: undecodable zstd frame: %v", streamNames[i], err)
			}
			if got := uint64(len(buf) - start); got != t.raw {
				return streams, buf, fmt.Sprintf("%s stream: zstd frame decodes to %d bytes, stream table says %d", streamNames[i], got, t.raw)
			}
		}
		streams[i] = buf[start:len(buf):len(buf)]
	}
	return streams, buf, ""
}

// streamHeader is a stream's entry in a stream table.
type streamHeader struct {
	raw      uint64
	encoding byte
	stored   []byte
}

// parseStreamTable parses the stream table of a block's stored payload
// and checks it against the block header. It returns the entries and how
// many there are, or why the table is damaged. Every length is checked
// before anything is allocated for it.
func parseStreamTable(h blockHeader, payload []byte) ([numStreams]streamHeader, int, string) {
	var table [numStreams]streamHeader
	d := decoder{p: payload}
	var n uint64 // an empty payload holds no streams
	if len(payload) > 0 {
		n = d.uv()
	}
	if n > numStreams {
		return table, 0, fmt.Sprintf("stream table holds %d streams, more than %d", n, numStreams)
	}
	var total uint64
	for i := range table[:n] {
		t := &table[i]
		t.raw = d.uv()
		stored := d.uv()
		t.encoding = d.u8()
		if d.bad != "" {
			return table, 0, fmt.Sprintf("stream table: %s stream: %s", streamNames[i], d.bad)
		}
		total += min(t.raw, maxBlockRaw+1)
		switch {
		case total > uint64(h.raw):
			return table, 0, fmt.Sprintf("stream table: streams up to the %s stream hold more than the %d bytes the block header says", streamNames[i], h.raw)
		case stored > t.raw:
			return table, 0, fmt.Sprintf("stream table: %s stream: stored length %d exceeds raw length %d", streamNames[i], stored, t.raw)
		case stored > uint64(len(d.p)-d.i):
			return table, 0, fmt.Sprintf("stream table: %s stream: stored length %d %s", streamNames[i], stored, errPastEnd)
		case t.encoding == encodingRaw && stored != t.raw:
			return table, 0, fmt.Sprintf("stream table: %s stream: raw stream with stored length %d and raw length %d", streamNames[i], stored, t.raw)
		case t.encoding != encodingRaw && t.encoding != encodingZstd:
			return table, 0, fmt.Sprintf("stream table: %s stream: unknown encoding %d", streamNames[i], t.encoding)
		}
		t.stored = d.p[d.i : d.i+int(stored)]
		d.i += int(stored)
		if t.encoding == encodingZstd {
			if why := checkFrame(t.stored, t.raw); why != "" {
				return table, 0, fmt.Sprintf("%s stream: %s", streamNames[i], why)
			}
		}
	}
	switch {
	case d.i != len(d.p):
		return table, 0, fmt.Sprintf("stream table: %d bytes after the last stream", len(d.p)-d.i)
	case total != uint64(h.raw):
		return table, 0, fmt.Sprintf("streams hold %d bytes, block header says %d", total, h.raw)
	}
	return table, int(n), ""
}

// checkFrame checks the header of a stream's zstd frame: it must say how
// much the frame holds, and that must be the stream's raw length.
func checkFrame(frame []byte, raw uint64) string {
	var fh zstd.Header
	if err := fh.Decode(frame); err != nil {
		return "undecodable zstd frame: " + err.Error()
	}
	switch {
	case !fh.HasFCS:
		return "zstd frame does not give its content size"
	case fh.FrameContentSize != raw:
		return fmt.Sprintf("zstd frame holds %d bytes, stream table says %d", fh.FrameContentSize, raw)
	}
	return ""
}
