package data

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// AP QA CSV columns (Pires et al. 2025, ap_protocols_qa).
const (
	apQuestion = "Question"
	apAnswer   = "Ground_Truth"
	apContext  = "Context"
)

// LoadAPQA reads the anatomical-pathology QA CSV (header
// Question,Ground_Truth,Context; extra columns are ignored). Query IDs are
// "q0001", "q0002", ... by data row order, so they are stable for a given
// file. Text = Question, Answer = Ground_Truth, Context = Context, as stored
// (CRLF inside quoted fields read as "\n").
//
// Errors are *RecordError with the 1-based line where the row starts: a
// missing file or column (ErrMissingField), a short row, invalid UTF-8, a
// NUL byte (ErrNULByte), an empty Question, Ground_Truth or Context
// (ErrEmptyText), no data rows at all (ErrNoRecords).
func LoadAPQA(path string) ([]Query, error) {
	var qs []Query
	col := map[string]int{}
	onHeader := func(header []string) error {
		for i, h := range header {
			col[h] = i
		}
		for _, name := range []string{apQuestion, apAnswer, apContext} {
			if _, ok := col[name]; !ok {
				return &RecordError{File: path, Unit: "line", Record: 1, Field: name, Err: ErrMissingField}
			}
		}
		return nil
	}
	err := readCSV(path, onHeader, func(header, row []string, line int) error {
		get := func(name string) (string, error) {
			v := row[col[name]]
			switch {
			case !utf8.ValidString(v):
				return "", &RecordError{File: path, Unit: "line", Record: line, Field: name, Err: ErrInvalidUTF8}
			case blank(v):
				return "", &RecordError{File: path, Unit: "line", Record: line, Field: name, Err: ErrEmptyText}
			}
			return v, nil
		}
		q := Query{ID: fmt.Sprintf("q%04d", len(qs)+1)}
		var err error
		if q.Text, err = get(apQuestion); err != nil {
			return err
		}
		if q.Answer, err = get(apAnswer); err != nil {
			return err
		}
		if q.Context, err = get(apContext); err != nil {
			return err
		}
		qs = append(qs, q)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		// A run over no questions would end "done" with nothing to show.
		return nil, &RecordError{File: path, Unit: "line", Record: 2, Err: ErrNoRecords}
	}
	return qs, nil
}

// LoadBEIRQueries reads BEIR's queries.jsonl: one {"_id", "text", ...} object
// per line; other keys (e.g. "metadata") are ignored. Integer ids are
// formatted in decimal.
//
// Errors are *RecordError with the 1-based line: a missing file, a missing
// or empty _id/text, invalid UTF-8, duplicate ids.
func LoadBEIRQueries(path string) ([]Query, error) {
	var qs []Query
	ids := idSet{}
	err := readJSONL(path, func(rec record, line int) error {
		w := where{file: path, unit: "line", pos: line}
		for _, k := range []string{"_id", "text"} {
			v, ok := rec[k]
			if !ok {
				return w.err(k, ErrMissingField)
			}
			if !validUTF8(v) {
				return w.err(k, ErrInvalidUTF8)
			}
		}
		var q Query
		switch v := rec["_id"].(type) {
		case string:
			q.ID = v
		case int64:
			q.ID = strconv.FormatInt(v, 10)
		default:
			return w.err("_id", fmt.Errorf("%w: want string or integer, got %T", ErrFieldType, v))
		}
		if blank(q.ID) {
			return w.err("_id", fmt.Errorf("%w: empty id", ErrMissingField))
		}
		t, ok := rec["text"].(string)
		if !ok {
			return w.err("text", fmt.Errorf("%w: want string, got %T", ErrFieldType, rec["text"]))
		}
		if blank(t) {
			return w.err("text", ErrEmptyText)
		}
		q.Text = t
		if first, ok := ids.add(q.ID, line); !ok {
			return dupErr(path, "line", line, "_id", q.ID, first)
		}
		qs = append(qs, q)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return qs, nil
}

// LoadQrels reads a BEIR qrels TSV (qrels/<split>.tsv): a header line
// (query-id, corpus-id, score; skipped, as BEIR's GenericDataLoader does),
// then "query-id<TAB>corpus-id<TAB>score" rows with an integer score (graded
// relevance, pytrec_eval convention; 0 may appear and means not relevant).
// Blank lines are ignored; a repeated (query, doc) pair must repeat its score.
//
// Errors are *RecordError with the 1-based line: a missing file or header, a
// row without exactly 3 fields, an empty id, a non-integer score, invalid
// UTF-8, a conflicting repeated pair.
func LoadQrels(path string) (Qrels, error) {
	qr, _, err := loadQrels(path)
	return qr, err
}

// loadQrels also returns, per query id, the line where it first appears.
func loadQrels(path string) (Qrels, map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load %s: %w", path, err)
	}
	defer f.Close()
	fields := [3]string{"query-id", "corpus-id", "score"}
	qr := Qrels{}
	firstLine := map[string]int{}
	br := bufio.NewReaderSize(f, 1<<16)
	header := false
	for line := 1; ; line++ {
		s, rerr := br.ReadString('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, nil, fmt.Errorf("load %s: line %d: %w", path, line, rerr)
		}
		s = strings.TrimRight(s, "\r\n")
		if strings.TrimSpace(s) != "" {
			w := where{file: path, unit: "line", pos: line}
			if !utf8.ValidString(s) {
				return nil, nil, w.err("", ErrInvalidUTF8)
			}
			parts := strings.Split(s, "\t")
			if len(parts) != 3 {
				return nil, nil, w.err("", fmt.Errorf("want 3 tab-separated fields (%s), got %d", strings.Join(fields[:], ", "), len(parts)))
			}
			score, serr := strconv.Atoi(strings.TrimSpace(parts[2]))
			switch {
			case !header:
				if serr == nil {
					return nil, nil, w.err("", errors.New("missing header line (query-id, corpus-id, score)"))
				}
				header = true
			case serr != nil:
				return nil, nil, w.err(fields[2], fmt.Errorf("%w: not an integer: %q", ErrFieldType, parts[2]))
			default:
				q, d := strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1])
				if q == "" {
					return nil, nil, w.err(fields[0], fmt.Errorf("%w: empty id", ErrMissingField))
				}
				if d == "" {
					return nil, nil, w.err(fields[1], fmt.Errorf("%w: empty id", ErrMissingField))
				}
				m := qr[q]
				if m == nil {
					m = map[string]int{}
					qr[q] = m
					firstLine[q] = line
				}
				if old, ok := m[d]; ok && old != score {
					return nil, nil, w.err(fields[2], fmt.Errorf("pair (%s, %s) repeated with score %d, earlier %d", q, d, score, old))
				}
				m[d] = score
			}
		}
		if rerr != nil {
			break
		}
	}
	if !header {
		return nil, nil, fmt.Errorf("load %s: no header line", path)
	}
	return qr, firstLine, nil
}

// LoadBEIR reads a BEIR dataset directory: corpus.jsonl, queries.jsonl and
// qrels/<split>.tsv (split default "test"). As in BEIR's
// GenericDataLoader.load, the returned queries are those that have
// judgments, in queries.jsonl order; a qrels query id missing from
// queries.jsonl is an error (BEIR raises KeyError). Judged corpus ids are
// not checked against the corpus.
func LoadBEIR(dir, split string) (docs []Document, queries []Query, qrels Qrels, err error) {
	if split == "" {
		split = "test"
	}
	if docs, err = LoadJSONL(filepath.Join(dir, "corpus.jsonl"), FieldOptions{}); err != nil {
		return nil, nil, nil, err
	}
	all, err := LoadBEIRQueries(filepath.Join(dir, "queries.jsonl"))
	if err != nil {
		return nil, nil, nil, err
	}
	qrelsPath := filepath.Join(dir, "qrels", split+".tsv")
	qrels, firstLine, err := loadQrels(qrelsPath)
	if err != nil {
		return nil, nil, nil, err
	}
	known := make(map[string]bool, len(all))
	for _, q := range all {
		known[q.ID] = true
		if _, ok := qrels[q.ID]; ok {
			queries = append(queries, q)
		}
	}
	var worst string
	for q := range qrels {
		if !known[q] && (worst == "" || firstLine[q] < firstLine[worst]) {
			worst = q
		}
	}
	if worst != "" {
		return nil, nil, nil, &RecordError{File: qrelsPath, Unit: "line", Record: firstLine[worst], Field: "query-id",
			Err: fmt.Errorf("query %q not in queries.jsonl", worst)}
	}
	return docs, queries, qrels, nil
}
