// Package mcqa evaluates answerers on multiple-choice medical QA as MIRAGE
// does (Xiong et al., "Benchmarking Retrieval-Augmented Generation for
// Medicine", Findings of ACL 2024; github.com/Teddy-XiongGZ/MIRAGE): benchmark
// reading and validation, MedRAG's prompts, answer parsing (strict, or
// MIRAGE's locate_answer), option log-likelihood, the conditions of RAG²
// (cot, rag, rag2, rag2-nofilter) and a report with 95% intervals and
// McNemar's exact test between conditions.
package mcqa

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Option is one answer option: its letter ("A") and text.
type Option struct {
	Letter string `json:"letter"`
	Text   string `json:"text"`
}

// Question is one multiple-choice question. Options are in letter order
// (MedRAG joins sorted(options.keys())); Answer is one of their letters.
type Question struct {
	Dataset  string   `json:"dataset"`
	ID       string   `json:"id"`
	Question string   `json:"question"`
	Options  []Option `json:"options"`
	Answer   string   `json:"answer"`
}

// Key is the question's store key, "<dataset>/<id>".
func (q Question) Key() string { return q.Dataset + "/" + q.ID }

// Option returns the text of the option with letter l.
func (q Question) Option(l string) (string, bool) {
	for _, o := range q.Options {
		if o.Letter == l {
			return o.Text, true
		}
	}
	return "", false
}

// Dataset is one dataset's questions, ids sorted as strings (MIRAGE's
// QADataset.index).
type Dataset struct {
	Name      string     `json:"name"`
	Questions []Question `json:"questions"`
}

// MIRAGEOrder is the order of MIRAGE's datasets in its tables and in
// src/evaluate.py; other datasets follow, sorted by name.
var MIRAGEOrder = []string{"mmlu", "medqa", "medmcqa", "pubmedqa", "bioasq"}

// LoadOptions select what Load returns.
type LoadOptions struct {
	// Datasets keeps only these datasets (every one must be in the file);
	// empty keeps all.
	Datasets []string
	// Limit keeps the first Limit questions of each dataset in id order; 0
	// keeps all.
	Limit int
}

// record is one question as the files spell it: MIRAGE's benchmark.json
// values, JSONL/JSON-list records {id, question, options, answer}, or
// RAG²'s records whose options are written inside the question text.
type record struct {
	ID       string          `json:"id"`
	Dataset  string          `json:"dataset"`
	Question *string         `json:"question"`
	Options  json.RawMessage `json:"options"`
	Answer   *string         `json:"answer"`
}

// Load reads a benchmark file: MIRAGE's benchmark.json ({dataset: {id:
// {question, options, answer}}}), a JSON list or a JSONL file of records
// {id, question, options, answer[, dataset]} (the dataset defaults to the
// file's base name), where options may be left out when the question text
// ends with them as RAG² writes them ("… A) x B) y C) z"). Every question is
// validated (non-empty id, question and options, letters A–Z, the answer
// among the options, ids unique per dataset); errors name the file, the
// dataset, the id and the field.
func Load(path string, opt LoadOptions) ([]Dataset, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	trimmed := bytes.TrimSpace(b)
	var by map[string][]rawQ
	switch {
	case len(trimmed) > 0 && trimmed[0] == '{' && isMIRAGE(trimmed):
		by, err = readMIRAGE(path, trimmed)
	case len(trimmed) > 0 && trimmed[0] == '[':
		var recs []json.RawMessage
		if err := json.Unmarshal(trimmed, &recs); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		by, err = readRecords(path, recs, "record")
	default:
		var recs []json.RawMessage
		for i, line := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			if !json.Valid(line) {
				return nil, fmt.Errorf("%s: line %d: not a JSON object", path, i+1)
			}
			recs = append(recs, line)
		}
		by, err = readRecords(path, recs, "line")
	}
	if err != nil {
		return nil, err
	}
	return assemble(path, by, opt)
}

// rawQ is a record with where it came from, before validation.
type rawQ struct {
	rec   record
	where string // "line 3", "record 2" or "" (MIRAGE: the id says it)
}

// isMIRAGE tells MIRAGE's nested object from a single JSON record.
func isMIRAGE(b []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return false
	}
	_, hasQ := top["question"]
	return !hasQ
}

// readMIRAGE streams MIRAGE's nested object so that a repeated dataset or
// question id (which json.Unmarshal into a map would silently merge) is
// seen and refused.
func readMIRAGE(path string, b []byte) (map[string][]rawQ, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	fail := func(err error) (map[string][]rawQ, error) {
		return nil, fmt.Errorf("%s: not MIRAGE's layout {dataset: {id: {question, options, answer}}}: %w", path, err)
	}
	open := func() error {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); !ok || d != '{' {
			return fmt.Errorf("want an object, got %v", t)
		}
		return nil
	}
	if err := open(); err != nil {
		return fail(err)
	}
	out := map[string][]rawQ{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		ds := t.(string)
		if _, dup := out[ds]; dup {
			return nil, fmt.Errorf("%s: dataset %q: repeated", path, ds)
		}
		out[ds] = nil
		if err := open(); err != nil {
			return fail(fmt.Errorf("dataset %q: %w", ds, err))
		}
		seen := map[string]bool{}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return fail(err)
			}
			id := t.(string)
			var r record
			if err := dec.Decode(&r); err != nil {
				return nil, fmt.Errorf("%s: dataset %q, id %q: %w", path, ds, id, err)
			}
			if seen[id] {
				return nil, fmt.Errorf("%s: dataset %q, id %q: field %q: duplicate id", path, ds, id, "id")
			}
			seen[id] = true
			r.ID, r.Dataset = id, ds
			out[ds] = append(out[ds], rawQ{rec: r})
		}
		if _, err := dec.Token(); err != nil { // '}'
			return fail(err)
		}
	}
	return out, nil
}

func readRecords(path string, recs []json.RawMessage, unit string) (map[string][]rawQ, error) {
	def := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	out := map[string][]rawQ{}
	for i, raw := range recs {
		var r record
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("%s: %s %d: %w", path, unit, i+1, err)
		}
		if r.Dataset == "" {
			r.Dataset = def
		}
		out[r.Dataset] = append(out[r.Dataset], rawQ{rec: r, where: fmt.Sprintf("%s %d", unit, i+1)})
	}
	return out, nil
}

// assemble validates, sorts, selects and limits the datasets.
func assemble(path string, by map[string][]rawQ, opt LoadOptions) ([]Dataset, error) {
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sortDatasets(names)
	if len(opt.Datasets) > 0 {
		for _, n := range opt.Datasets {
			if _, ok := by[n]; !ok {
				return nil, fmt.Errorf("%s: no dataset %q (have %s)", path, n, strings.Join(names, ", "))
			}
		}
		names = slices.DeleteFunc(names, func(n string) bool { return !slices.Contains(opt.Datasets, n) })
	}
	var out []Dataset
	for _, n := range names {
		ds := Dataset{Name: n}
		seen := map[string]string{}
		for _, r := range by[n] {
			q, err := validate(r.rec)
			if err != nil {
				return nil, fmt.Errorf("%s: %s%w", path, where(r.where), err)
			}
			if prev, dup := seen[q.ID]; dup {
				return nil, fmt.Errorf("%s: %sdataset %q, id %q: field %q: duplicate id (first at %s)", path, where(r.where), n, q.ID, "id", prev)
			}
			seen[q.ID] = r.where
			ds.Questions = append(ds.Questions, q)
		}
		sort.Slice(ds.Questions, func(i, j int) bool { return ds.Questions[i].ID < ds.Questions[j].ID })
		if opt.Limit > 0 && len(ds.Questions) > opt.Limit {
			ds.Questions = ds.Questions[:opt.Limit]
		}
		out = append(out, ds)
	}
	return out, nil
}

func where(w string) string {
	if w == "" {
		return ""
	}
	return w + ": "
}

// sortDatasets orders names as MIRAGEOrder, then the rest by name.
func sortDatasets(names []string) {
	rank := func(n string) int {
		if i := slices.Index(MIRAGEOrder, n); i >= 0 {
			return i
		}
		return len(MIRAGEOrder)
	}
	sort.Slice(names, func(i, j int) bool {
		ri, rj := rank(names[i]), rank(names[j])
		if ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
}

var letterRE = regexp.MustCompile(`^[A-Z]$`)

// validate turns a record into a Question or names the bad field.
func validate(r record) (Question, error) {
	bad := func(field, format string, args ...any) (Question, error) {
		return Question{}, fmt.Errorf("dataset %q, id %q: field %q: %s", r.Dataset, r.ID, field, fmt.Sprintf(format, args...))
	}
	if strings.TrimSpace(r.ID) == "" {
		return bad("id", "missing or empty")
	}
	if r.Question == nil || strings.TrimSpace(*r.Question) == "" {
		return bad("question", "missing or empty")
	}
	q := Question{Dataset: r.Dataset, ID: r.ID, Question: *r.Question}
	if len(r.Options) == 0 || string(r.Options) == "null" {
		stem, opts, ok := SplitInlineOptions(q.Question)
		if !ok {
			return bad("options", "missing, and the question text has no inline options \"A) … B) …\"")
		}
		q.Question, q.Options = stem, opts
	} else {
		var m map[string]string
		if err := json.Unmarshal(r.Options, &m); err != nil {
			return bad("options", "want an object {\"A\": text, …}: %v", err)
		}
		if len(m) < 2 {
			return bad("options", "%d options, want at least 2", len(m))
		}
		for l, t := range m {
			if !letterRE.MatchString(l) {
				return bad("options", "key %q is not a letter A–Z", l)
			}
			if strings.TrimSpace(t) == "" {
				return bad("options", "option %s is empty", l)
			}
			q.Options = append(q.Options, Option{Letter: l, Text: t})
		}
		sort.Slice(q.Options, func(i, j int) bool { return q.Options[i].Letter < q.Options[j].Letter })
	}
	if r.Answer == nil || *r.Answer == "" {
		return bad("answer", "missing or empty")
	}
	if _, ok := q.Option(*r.Answer); !ok {
		return bad("answer", "%q is not among the options %s", *r.Answer, letters(q.Options))
	}
	q.Answer = *r.Answer
	return q, nil
}

func letters(opts []Option) string {
	ls := make([]string, len(opts))
	for i, o := range opts {
		ls[i] = o.Letter
	}
	return strings.Join(ls, ",")
}

// inlineRE finds option marks "A) " at the start or after white space.
var inlineRE = regexp.MustCompile(`(?:^|\s)([A-Z])\) `)

// SplitInlineOptions splits RAG²'s question format, where the options
// follow the stem in the text ("Which …? A) x B) y C) z D) w"), into the
// stem and the options. The options must run A, B, C, … in order, at least
// two, the last to the end of the text; the latest "A) " that starts such a
// run is taken, so an "A)" inside the stem does not count.
func SplitInlineOptions(text string) (stem string, opts []Option, ok bool) {
	marks := inlineRE.FindAllStringSubmatchIndex(text, -1)
	for s := len(marks) - 1; s >= 0; s-- {
		if text[marks[s][2]:marks[s][3]] != "A" {
			continue
		}
		run := []int{s}
		want := byte('B')
		for j := s + 1; j < len(marks); j++ {
			if text[marks[j][2]] == want {
				run = append(run, j)
				want++
			}
		}
		if len(run) < 2 {
			continue
		}
		for i, j := range run {
			end := len(text)
			if i+1 < len(run) {
				end = marks[run[i+1]][0]
			}
			opts = append(opts, Option{Letter: text[marks[j][2]:marks[j][3]], Text: strings.TrimSpace(text[marks[j][1]:end])})
		}
		for _, o := range opts {
			if o.Text == "" {
				return "", nil, false
			}
		}
		return strings.TrimSpace(text[:marks[s][0]]), opts, true
	}
	return "", nil, false
}

// ErrNoQuestions is returned when the selection holds no question.
var ErrNoQuestions = errors.New("no questions")
