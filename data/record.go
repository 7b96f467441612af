package data

import (
	"fmt"
	"sort"
	"strconv"
	"unicode/utf8"
)

// FieldOptions names the fields of a corpus record and says what to do with
// empty ones. The zero value follows the BEIR / Hugging Face conventions.
type FieldOptions struct {
	// TextField is the text column/key. Default "text".
	TextField string
	// IDField is the id column/key. Default: "_id" (BEIR) if the source has
	// it, else "id"; when the source has neither, the id is the 0-based
	// record index formatted with %d ("0", "1", ...), stable across runs.
	// An explicitly named IDField that a record lacks is an error.
	IDField string
	// TitleField fills Document.Title. Default "title" when present. The
	// title also stays in Meta (see Document).
	TitleField string
	// SkipEmpty skips records whose text is missing, null or only
	// whitespace instead of failing with ErrEmptyText; each skip is reported
	// to OnSkip. Skipped records take no part in duplicate-id checks.
	SkipEmpty bool
	// OnSkip, if non-nil, is called once per skipped record with the file
	// and the record's position (same unit as RecordError). Use it to
	// count skips; libraries in ragforge never print.
	OnSkip func(file string, record int)
	// MaxFieldBytes bounds every string field of a record, checked before
	// the record becomes a document (0: DefaultMaxFieldBytes), so one huge
	// field is an error naming it rather than gigabytes of chunks and
	// index (issue 30: a 20 MB CSV field took 2.6 GB downstream).
	MaxFieldBytes int
}

// DefaultMaxFieldBytes is the default FieldOptions.MaxFieldBytes: 8 MiB,
// a few whole books of plain text in one field.
const DefaultMaxFieldBytes = 8 << 20

// fieldNames resolves the effective field names for a source; has reports
// whether a column exists. id is "" when the source has no id column and the record
// index is the id.
func (o FieldOptions) fieldNames(has func(string) bool) (text, id, title string) {
	text = o.TextField
	if text == "" {
		text = "text"
	}
	id = o.IDField
	if id == "" {
		switch {
		case has("_id"):
			id = "_id"
		case has("id"):
			id = "id"
		}
	}
	title = o.TitleField
	if title == "" && has("title") {
		title = "title"
	}
	return text, id, title
}

// record is one source record as JSON-compatible Go values: string, int64,
// float64, bool, nil, []any, map[string]any. A key with a nil value is
// present but null (omitted from Meta); an absent key is a missing field.
type record map[string]any

// where locates a record for errors.
type where struct {
	file string
	unit string // "line" or "row"
	pos  int    // position in unit
	idx  int    // 0-based data record index, the default id
}

func (w where) err(field string, err error) error {
	return &RecordError{File: w.file, Unit: w.unit, Record: w.pos, Field: field, Err: err}
}

// toDocument validates rec and converts it. It returns skip=true (and no
// error) for an empty text when o.SkipEmpty is set.
func (o FieldOptions) toDocument(rec record, w where) (doc Document, skip bool, err error) {
	has := func(k string) bool { _, ok := rec[k]; return ok }
	textF, idF, titleF := o.fieldNames(has)

	keys := make([]string, 0, len(rec))
	for k := range rec {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	limit := o.MaxFieldBytes
	if limit <= 0 {
		limit = DefaultMaxFieldBytes
	}
	for _, k := range keys {
		if s, ok := rec[k].(string); ok && len(s) > limit {
			return doc, false, w.err(k, fmt.Errorf("%w: %d bytes, over the limit of %d bytes per field (max-field-bytes)", ErrFieldTooLong, len(s), limit))
		}
		if !validUTF8(rec[k]) {
			return doc, false, w.err(k, ErrInvalidUTF8)
		}
	}

	tv, ok := rec[textF]
	if !ok {
		return doc, false, w.err(textF, ErrMissingField)
	}
	if tv != nil {
		s, isStr := tv.(string)
		if !isStr {
			return doc, false, w.err(textF, fmt.Errorf("%w: want string, got %T", ErrFieldType, tv))
		}
		doc.Text = s
	}
	if blank(doc.Text) {
		if o.SkipEmpty {
			if o.OnSkip != nil {
				o.OnSkip(w.file, w.pos)
			}
			return doc, true, nil
		}
		return doc, false, w.err(textF, ErrEmptyText)
	}

	if idF == "" {
		doc.ID = strconv.Itoa(w.idx)
	} else {
		iv, ok := rec[idF]
		if !ok {
			return doc, false, w.err(idF, ErrMissingField)
		}
		switch v := iv.(type) {
		case string:
			doc.ID = v
		case int64:
			doc.ID = strconv.FormatInt(v, 10)
		case nil:
		default:
			return doc, false, w.err(idF, fmt.Errorf("%w: want string or integer, got %T", ErrFieldType, iv))
		}
		if blank(doc.ID) {
			return doc, false, w.err(idF, fmt.Errorf("%w: empty id", ErrMissingField))
		}
	}

	if titleF != "" {
		tv, ok := rec[titleF]
		if !ok {
			return doc, false, w.err(titleF, ErrMissingField)
		}
		switch v := tv.(type) {
		case string:
			doc.Title = v
		case nil:
		default:
			return doc, false, w.err(titleF, fmt.Errorf("%w: want string, got %T", ErrFieldType, tv))
		}
	}

	for _, k := range keys {
		if k == textF || k == idF || rec[k] == nil {
			continue
		}
		if doc.Meta == nil {
			doc.Meta = make(map[string]any, len(rec))
		}
		doc.Meta[k] = rec[k]
	}
	return doc, false, nil
}

// validUTF8 reports whether every string inside v is valid UTF-8.
func validUTF8(v any) bool {
	switch x := v.(type) {
	case string:
		return utf8.ValidString(x)
	case []any:
		for _, e := range x {
			if !validUTF8(e) {
				return false
			}
		}
	case map[string]any:
		for k, e := range x {
			if !utf8.ValidString(k) || !validUTF8(e) {
				return false
			}
		}
	}
	return true
}

// collector converts records in order and rejects duplicate ids. With emit
// set, documents go to emit as they are read instead of into docs (Walk).
type collector struct {
	opt  FieldOptions
	docs []Document
	ids  idSet
	emit func(Document) error
}

func newCollector(opt FieldOptions) *collector {
	return &collector{opt: opt, ids: idSet{}}
}

func (c *collector) add(rec record, w where) error {
	doc, skip, err := c.opt.toDocument(rec, w)
	if err != nil || skip {
		return err
	}
	if first, ok := c.ids.add(doc.ID, w.pos); !ok {
		_, idF, _ := c.opt.fieldNames(func(k string) bool { _, ok := rec[k]; return ok })
		return dupErr(w.file, w.unit, w.pos, idF, doc.ID, first)
	}
	if c.emit != nil {
		return c.emit(doc)
	}
	c.docs = append(c.docs, doc)
	return nil
}
