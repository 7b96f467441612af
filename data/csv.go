package data

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// LoadCSV reads a corpus from a CSV file with a header row (RFC 4180 via
// encoding/csv: quoted fields may hold commas, quotes and newlines; a CRLF
// inside a quoted field is read as "\n"; a leading UTF-8 BOM is dropped).
// Columns are named by the header; opt names the text/id/title columns and
// every other column goes to Meta as a string. Without an id column the id
// is the 0-based data row index.
//
// Errors are *RecordError with the 1-based line where the record starts: a
// missing file, a malformed quote, a row with fewer columns than the header
// (ErrMissingField naming the first missing column) or more, a duplicate or
// empty header name, invalid UTF-8, a NUL byte (ErrNULByte), a missing text column, empty text
// (ErrEmptyText unless opt.SkipEmpty), duplicate ids.
func LoadCSV(path string, opt FieldOptions) ([]Document, error) {
	c := newCollector(opt)
	if err := c.csv(path); err != nil {
		return nil, err
	}
	return c.docs, nil
}

// csv passes path's rows to c.
func (c *collector) csv(path string) error {
	idx := 0
	err := readCSV(path, nil, func(header, row []string, line int) error {
		rec := make(record, len(header))
		for i, h := range header {
			rec[h] = row[i]
		}
		err := c.add(rec, where{file: path, unit: "line", pos: line, idx: idx})
		idx++
		return err
	})
	return err
}

// readCSV calls onHeader (if non-nil) with the validated header, then fn for
// each data row of path (rows as long as the header, checked) with the
// 1-based line where the row starts.
func readCSV(path string, onHeader func(header []string) error, fn func(header, row []string, line int) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("load %s: %w", path, err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	recErr := func(line int, field string, err error) error {
		return &RecordError{File: path, Unit: "line", Record: line, Field: field, Err: err}
	}
	parseErr := func(err error) error {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return recErr(pe.StartLine, "", pe.Err)
		}
		return fmt.Errorf("load %s: %w", path, err)
	}

	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return recErr(1, "", errors.New("no header row"))
	}
	if err != nil {
		return parseErr(err)
	}
	header[0] = strings.TrimPrefix(header[0], "\ufeff")
	seen := map[string]bool{}
	for i, h := range header {
		if strings.IndexByte(h, 0) >= 0 {
			return recErr(1, "", fmt.Errorf("header column %d: %w", i+1, ErrNULByte))
		}
		if !utf8.ValidString(h) {
			return recErr(1, "", fmt.Errorf("header column %d: %w", i+1, ErrInvalidUTF8))
		}
		if h == "" {
			return recErr(1, "", fmt.Errorf("header column %d: empty name", i+1))
		}
		if seen[h] {
			return recErr(1, h, errors.New("duplicate header name"))
		}
		seen[h] = true
	}
	if onHeader != nil {
		if err := onHeader(header); err != nil {
			return err
		}
	}

	for {
		row, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return parseErr(err)
		}
		line, _ := r.FieldPos(0)
		if len(row) < len(header) {
			return recErr(line, header[len(row)], fmt.Errorf("%w: row has %d of %d columns", ErrMissingField, len(row), len(header)))
		}
		if len(row) > len(header) {
			return recErr(line, "", fmt.Errorf("row has %d columns, header has %d", len(row), len(header)))
		}
		for i, v := range row {
			if strings.IndexByte(v, 0) >= 0 {
				return recErr(line, header[i], ErrNULByte)
			}
		}
		if err := fn(header, row, line); err != nil {
			return err
		}
	}
}
