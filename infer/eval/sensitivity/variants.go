// Package sensitivity measures how retrieval quality depends on the way a
// question is formulated: for variants of each question (short, medium,
// long, canonical, paraphrased, yes/no, WH, ...), retrieval metrics per
// variant (retrieval/eval: P@k, Recall@k, F1@k, nDCG@k, MRR@10), each
// variant's perplexity under a language model, and the Pearson and Spearman
// correlations of perplexity and of length with each metric.
package sensitivity

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragforge/ragforge/data"
)

// Variant is one formulation of a question.
type Variant struct {
	QueryID string `json:"question_id"` // groups the variants of one question; qrels key
	Variant string `json:"variant"`     // formulation label, e.g. "short", "wh"
	Text    string `json:"text"`
	Context string `json:"context,omitempty"` // reference passage (optional; for qrels)
}

// ReadVariants reads a variants file: ".csv" (header with columns
// question_id, variant, text and optionally context, in any order; extra
// columns ignored) or ".jsonl" (one object per line with those keys; blank
// lines skipped). Errors name the file, the record (CSV line or JSONL line,
// 1-based) and the field: a missing column, an empty question_id, variant
// or text, a duplicate (question_id, variant), an unknown extension.
func ReadVariants(path string) ([]Variant, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read variants: %w", err)
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		return ParseCSV(bytes.NewReader(b), path)
	case ".jsonl":
		return ParseJSONL(bytes.NewReader(b), path)
	}
	return nil, fmt.Errorf("read variants %s: unknown extension (want .csv or .jsonl)", path)
}

var required = []string{"question_id", "variant", "text"}

// ParseCSV parses the CSV form of ReadVariants; name labels errors.
func ParseCSV(r io.Reader, name string) ([]Variant, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("load %s: header: %w", name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for _, f := range required {
		if _, ok := col[f]; !ok {
			return nil, fmt.Errorf("load %s: line 1: field %q: missing column", name, f)
		}
	}
	var out []Variant
	seen := map[[2]string]int{}
	for {
		line, _ := cr.FieldPos(0)
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", name, err)
		}
		line, _ = cr.FieldPos(0)
		get := func(f string) string {
			i, ok := col[f]
			if !ok || i >= len(rec) {
				return ""
			}
			return rec[i]
		}
		v := Variant{QueryID: strings.TrimSpace(get("question_id")), Variant: strings.TrimSpace(get("variant")), Text: get("text"), Context: get("context")}
		if err := check(v, seen, len(out)); err != nil {
			return nil, fmt.Errorf("load %s: line %d: %w", name, line, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// ParseJSONL parses the JSONL form of ReadVariants; name labels errors.
func ParseJSONL(r io.Reader, name string) ([]Variant, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var out []Variant
	seen := map[[2]string]int{}
	for line := 1; sc.Scan(); line++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var v Variant
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("load %s: line %d: %w", name, line, err)
		}
		v.QueryID, v.Variant = strings.TrimSpace(v.QueryID), strings.TrimSpace(v.Variant)
		if err := check(v, seen, len(out)); err != nil {
			return nil, fmt.Errorf("load %s: line %d: %w", name, line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	return out, nil
}

func check(v Variant, seen map[[2]string]int, idx int) error {
	for f, s := range map[string]string{"question_id": v.QueryID, "variant": v.Variant, "text": v.Text} {
		if strings.TrimSpace(s) == "" {
			return fmt.Errorf("field %q: empty", f)
		}
	}
	key := [2]string{v.QueryID, v.Variant}
	if j, dup := seen[key]; dup {
		return fmt.Errorf("field %q: duplicate variant %q of question %q (first at record %d)", "variant", v.Variant, v.QueryID, j+1)
	}
	seen[key] = idx
	return nil
}

// Queries returns one data.Query per question id, in first-appearance
// order, with the first non-empty Context among its variants and the text
// of its first variant, for building qrels with retrieval/eval.BuildQrels.
func Queries(vs []Variant) []data.Query {
	idx := map[string]int{}
	var out []data.Query
	for _, v := range vs {
		i, ok := idx[v.QueryID]
		if !ok {
			idx[v.QueryID] = len(out)
			out = append(out, data.Query{ID: v.QueryID, Text: v.Text, Context: v.Context})
			continue
		}
		if out[i].Context == "" {
			out[i].Context = v.Context
		}
	}
	return out
}
