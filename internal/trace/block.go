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
	encoding uint8
	stored   uint32 // payload bytes in the file
	raw      uint32 // payload bytes once decoded
	crc      uint32 // CRC-32C of the stored payload
}

func (h blockHeader) appendTo(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, blockMagic)
	dst = append(dst, h.encoding, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, h.stored)
	dst = binary.LittleEndian.AppendUint32(dst, h.raw)
	return binary.LittleEndian.AppendUint32(dst, h.crc)
}

// parseBlockHeader decodes b[:blockHeaderSize] and checks everything in it
// that can be checked without the payload. A sound writer stores a payload
// raw whenever compression would not make it smaller, so stored <= raw: that
// bounds what a reader reads for a header it cannot trust yet.
func parseBlockHeader(b []byte) (blockHeader, string) {
	if binary.LittleEndian.Uint32(b) != blockMagic {
		return blockHeader{}, "bad block magic"
	}
	h := blockHeader{
		encoding: b[4],
		stored:   binary.LittleEndian.Uint32(b[8:]),
		raw:      binary.LittleEndian.Uint32(b[12:]),
		crc:      binary.LittleEndian.Uint32(b[16:]),
	}
	switch {
	case b[5] != 0 || b[6] != 0 || b[7] != 0:
		return h, "bad block header: reserved bytes are not zero"
	case h.encoding != encodingRaw && h.encoding != encodingZstd:
		return h, fmt.Sprintf("bad block header: unknown encoding %d", h.encoding)
	case h.raw > maxBlockRaw:
		return h, fmt.Sprintf("bad block header: raw length %d exceeds the limit", h.raw)
	case h.stored > h.raw:
		return h, fmt.Sprintf("bad block header: stored length %d exceeds raw length %d", h.stored, h.raw)
	case h.encoding == encodingRaw && h.stored != h.raw:
		return h, fmt.Sprintf("bad block header: raw block with stored length %d and raw length %d", h.stored, h.raw)
	}
	return h, ""
}

// appendBlock appends a whole block (header and payload) holding raw to dst.
// With compress set it tries zstd and keeps the result only if it is
// smaller.
func appendBlock(dst, raw []byte, compress bool) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, blockHeaderSize)...)
	h := blockHeader{encoding: encodingRaw, raw: uint32(len(raw))}
	if compress && len(raw) > 0 {
		dst = zstdEncoder().EncodeAll(raw, dst)
		if len(dst)-start-blockHeaderSize < len(raw) {
			h.encoding = encodingZstd
		} else {
			dst = dst[:start+blockHeaderSize]
		}
	}
	if h.encoding == encodingRaw {
		dst = append(dst, raw...)
	}
	payload := dst[start+blockHeaderSize:]
	h.stored = uint32(len(payload))
	h.crc = crc32.Checksum(payload, castagnoli)
	h.appendTo(dst[start:start])
	return dst
}

// The zstd encoder and decoder are shared by all Writers and Readers: both
// are safe for concurrent use, and building one is costly.
var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderCRC(false), // blocks carry their own CRC-32C
			// Event fields are varints with few repeats: entropy coding
			// of literals is where the fastest level finds its gain.
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

// decodePayload decodes a block's stored payload into dst (reusing its
// memory) and checks that it has the length the header promised.
func decodePayload(h blockHeader, stored, dst []byte) ([]byte, string) {
	if h.encoding == encodingRaw {
		return append(dst[:0], stored...), ""
	}
	// The frame header is covered by the CRC, the raw length in the block
	// header is not: trust the frame's content size, when it has one, to
	// size the buffer.
	var fh zstd.Header
	if err := fh.Decode(stored); err != nil {
		return dst, "undecodable zstd payload: " + err.Error()
	}
	if fh.HasFCS {
		if fh.FrameContentSize != uint64(h.raw) {
			return dst, fmt.Sprintf("zstd frame holds %d bytes, block header says %d", fh.FrameContentSize, h.raw)
		}
		if cap(dst) < int(h.raw) {
			dst = make([]byte, 0, h.raw)
		}
	}
	out, err := zstdDecoder().DecodeAll(stored, dst[:0])
	if err != nil {
		return dst, "undecodable zstd payload: " + err.Error()
	}
	if len(out) != int(h.raw) {
		return out, fmt.Sprintf("payload decodes to %d bytes, block header says %d", len(out), h.raw)
	}
	return out, ""
}
