package data

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Sentinel causes wrapped by RecordError; test them with errors.Is.
var (
	// ErrEmptyText: the text field is missing, null or only whitespace.
	ErrEmptyText = errors.New("empty text")
	// ErrInvalidUTF8: a string field holds bytes that are not valid UTF-8.
	ErrInvalidUTF8 = errors.New("invalid UTF-8")
	// ErrNULByte: a field holds a NUL byte (U+0000), which JSON loaders
	// refuse too and which usually means a binary or UTF-16 file.
	ErrNULByte = errors.New("NUL byte (binary or UTF-16 file?)")
	// ErrNoRecords: a file holds a header but no data rows.
	ErrNoRecords = errors.New("no data rows after the header")
	// ErrDuplicateID: two records share an id.
	ErrDuplicateID = errors.New("duplicate id")
	// ErrMissingField: a required column or key is absent from a record.
	ErrMissingField = errors.New("missing field")
	// ErrFieldType: a field has a type the loader cannot use (e.g. a number
	// where text is required).
	ErrFieldType = errors.New("wrong field type")
	// ErrFieldTooLong: a string field is over FieldOptions.MaxFieldBytes.
	ErrFieldTooLong = errors.New("field too long")
)

// RecordError locates a bad record: the file, the record's position and the
// field at fault. Unit is "line" (1-based physical line of the record's start,
// for JSONL, CSV and TSV, header included) or "row" (0-based row index, for
// Arrow datasets, as in datasets.Dataset[i]). Field is empty when the fault
// concerns the whole record.
//
// Error() reads `load FILE: line N: field "F": cause`.
type RecordError struct {
	File   string
	Unit   string
	Record int
	Field  string
	Err    error
}

func (e *RecordError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "load %s: %s %d", e.File, e.Unit, e.Record)
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %q", e.Field)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *RecordError) Unwrap() error { return e.Err }

// isSpace reports whether r is whitespace for Python's str.isspace /
// str.strip / str.split: Go's unicode.IsSpace plus the ASCII information
// separators U+001C..U+001F, which Python also counts as whitespace.
func isSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// blank reports whether s is empty or only whitespace (Python: not s.strip()).
func blank(s string) bool {
	return strings.TrimFunc(s, isSpace) == ""
}

// idSet detects duplicate ids and remembers where each id was first seen.
type idSet map[string]int

// add records id at position pos; it returns the earlier position and false
// when id was already present.
func (s idSet) add(id string, pos int) (int, bool) {
	if first, ok := s[id]; ok {
		return first, false
	}
	s[id] = pos
	return pos, true
}

func dupErr(file, unit string, pos int, field, id string, first int) error {
	return &RecordError{File: file, Unit: unit, Record: pos, Field: field,
		Err: fmt.Errorf("%w %q (first at %s %d)", ErrDuplicateID, id, unit, first)}
}
