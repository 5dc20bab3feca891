package trace

import (
	"errors"
	"fmt"
)

// ErrNotTrace says that a file does not start with the trace magic.
var ErrNotTrace = errors.New("not a memtrail trace")

// ErrIncomplete says that a trace ended cleanly at a block boundary but
// without its End record: the recorder was stopped before it could finish.
// Everything before that point was read. The Reader returns it once, in
// place of io.EOF.
var ErrIncomplete = errors.New("trace has no end record: the recorder stopped before finishing")

// VersionError says that a trace has a format version this package cannot
// read.
type VersionError struct {
	Version uint16
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("unsupported trace version %d (this memtrail reads versions %d to %d)", e.Version, minVersion, Version)
}

// DamageError reports a damaged or truncated part of a trace. It is not
// fatal: the next call to Reader.Next resumes reading after the damage.
type DamageError struct {
	Offset       int64  // file offset of the damaged block
	BytesSkipped int64  // how much could not be read (see Reason)
	Reason       string // what was wrong
	Truncated    bool   // the file ends inside a block
}

func (e *DamageError) Error() string {
	if e.Truncated {
		return fmt.Sprintf("trace truncated at byte %d: %s (%d bytes lost)", e.Offset, e.Reason, e.BytesSkipped)
	}
	return fmt.Sprintf("trace damaged at byte %d: %s; skipped %d bytes", e.Offset, e.Reason, e.BytesSkipped)
}
