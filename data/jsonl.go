package data

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"unicode/utf8"
)

// LoadJSONL reads a corpus from a JSON Lines file: one JSON object per line
// (blank lines are ignored), e.g. BEIR's corpus.jsonl
// {"_id": ..., "title": ..., "text": ...}. opt names the fields for other
// schemas; every key other than the text and id keys goes to Meta (integers
// as int64, other numbers as float64, nulls omitted).
//
// Errors are *RecordError with the 1-based line number: a missing file, a
// line that is not a JSON object, invalid UTF-8 in a key or value (checked
// on the raw bytes, since encoding/json would silently replace it), a
// missing text/id key (ErrMissingField), a non-string text (ErrFieldType),
// empty text (ErrEmptyText unless opt.SkipEmpty), duplicate ids.
func LoadJSONL(path string, opt FieldOptions) ([]Document, error) {
	c := newCollector(opt)
	if err := c.jsonl(path); err != nil {
		return nil, err
	}
	return c.docs, nil
}

// jsonl passes path's records to c.
func (c *collector) jsonl(path string) error {
	idx := 0
	err := readJSONL(path, func(rec record, line int) error {
		err := c.add(rec, where{file: path, unit: "line", pos: line, idx: idx})
		idx++
		return err
	})
	return err
}

// readJSONL calls fn for each non-blank line of path, decoded as a JSON
// object, with its 1-based line number.
func readJSONL(path string, fn func(rec record, line int) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("load %s: %w", path, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	for line := 1; ; line++ {
		b, rerr := br.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("load %s: line %d: %w", path, line, rerr)
		}
		if len(bytes.TrimSpace(b)) > 0 {
			rec, field, err := decodeObject(b)
			if err != nil {
				return &RecordError{File: path, Unit: "line", Record: line, Field: field, Err: err}
			}
			if err := fn(rec, line); err != nil {
				return err
			}
		}
		if rerr != nil { // io.EOF
			return nil
		}
	}
}

// decodeObject decodes one JSON object, checking UTF-8 on the raw bytes of
// each key and value. On error it returns the offending field, if known.
func decodeObject(b []byte) (record, string, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, "", fmt.Errorf("not a JSON object: %w", err)
	}
	if !utf8.Valid(b) {
		// Locate the field: values are kept raw; keys were already
		// replaced by encoding/json, so a bad key shows as a valid one
		// whose value is valid too.
		keys := make([]string, 0, len(raw))
		for k := range raw {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !utf8.Valid(raw[k]) {
				return nil, k, ErrInvalidUTF8
			}
		}
		return nil, "", fmt.Errorf("%w in a key", ErrInvalidUTF8)
	}
	rec := make(record, len(raw))
	for k, v := range raw {
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		var x any
		if err := d.Decode(&x); err != nil {
			return nil, k, err
		}
		rec[k] = fromJSON(x)
	}
	return rec, "", nil
}

// fromJSON turns json.Number into int64 (integers that fit) or float64.
func fromJSON(x any) any {
	switch v := x.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case []any:
		for i := range v {
			v[i] = fromJSON(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = fromJSON(v[k])
		}
	}
	return x
}
