// Package tracetext is a text form of memtrail traces, for tests: small
// traces kept as readable files beside the outcome expected from them.
//
// A trace in text is one record per line: the record's name, then its
// fields as key=value pairs in any order. Blank lines are ignored, and so is
// everything from a '#' that starts a word to the end of its line.
//
//	# a program that leaks one block
//	info time-unit=1 command=[./prog a]
//	process id=1 pid=100 exe=/bin/prog args=[prog a]
//	object id=1 path=/bin/prog build-id=abcd
//	module process=1 id=1 object=1 base=0x400000 segments=0x0:0x2000:0x0:r-x
//	thread process=1 index=1 tid=100
//	string id=1 value=main
//	node process=1 id=1 parent=0 module=1 offset=0x1234
//	symbol object=1 offset=0x1234 frames=1:2:10
//	type object=1 size=16 name=node
//	alloc process=1 thread=1 time=10 api=malloc addr=0x1000 size=16 stack=1
//	free process=1 thread=1 time=20 api=free addr=0x1000 stack=1 stack-use=320
//	thread-stack process=1 index=1 time=25 high-water=4096 size=8388608
//	process-end id=1 time=30 how=exited code=0
//	end time=30 events=2
//
// Values are written bare when they hold no space, quote, bracket or '#',
// and otherwise as Go string literals ("a b"). Lists of strings are written
// in brackets, [prog "a b"]; a quoted string is also accepted for them and is
// split at white space. Numbers may be decimal or 0x-prefixed hex. Enums
// (api, how, status) take a name or a number. Symbol frames are
// function:file:line triples of string ids, innermost first, separated by
// ';'; module segments are vaddr:memsz:offset:flags with flags like r-x.
// Fields left out are zero. Events name their process and thread on every
// line: the binary form's context records have no text form.
//
// The record names are those of trace.Kind, except that process-start is
// written "process" and stack-node "node"; the long names are accepted too.
package tracetext

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/memtrail/memtrail/internal/trace"
)

// Parse parses a trace in text form.
func Parse(text string) ([]trace.Record, error) {
	var recs []trace.Record
	for n, line := range strings.Split(text, "\n") {
		rec, ok, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		if ok {
			recs = append(recs, rec)
		}
	}
	return recs, nil
}

// Format writes records in text form, one per line. Format(Parse(text))
// is the canonical form of text.
func Format(recs []trace.Record) string {
	var b strings.Builder
	for _, rec := range recs {
		formatRecord(&b, rec)
		b.WriteByte('\n')
	}
	return b.String()
}

// Write writes records with w. It does not write Info records: NewWriter
// writes the one a trace has.
func Write(w *trace.Writer, recs []trace.Record) error {
	for i, rec := range recs {
		if rec.Kind == trace.KindInfo {
			return fmt.Errorf("record %d: the info record is written by trace.NewWriter", i+1)
		}
		if err := w.Write(rec); err != nil {
			return fmt.Errorf("record %d: %w", i+1, err)
		}
	}
	return nil
}

// Encode turns a trace in text form into the bytes of a trace file. The
// text's first line may be its info record; without one the trace gets an
// Info with a time unit of 1 ns. The file has an End record only if the
// text has one, so that incomplete traces can be written too.
func Encode(text string) ([]byte, error) {
	recs, err := Parse(text)
	if err != nil {
		return nil, err
	}
	info := trace.Info{TimeUnit: 1}
	if len(recs) > 0 && recs[0].Kind == trace.KindInfo {
		info = *recs[0].Info
		recs = recs[1:]
	}
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, info)
	if err != nil {
		return nil, err
	}
	if err := Write(w, recs); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Decode reads all records of a trace file. It stops at the first error,
// damage included, and returns it with the records read until then; a
// trace without an End record gives trace.ErrIncomplete.
func Decode(data []byte) ([]trace.Record, error) {
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	var recs []trace.Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		recs = append(recs, rec)
	}
}
