package labelstore

import (
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ragforge/ragforge/models/filter"
)

const recordCols = `id, run_id, example_key, example_id, query_id, question, target, snippet, chunk_id, dataset_name,
	label, method, scorer, COALESCE(ppl_without, 0), COALESCE(ppl_with, 0), score, created,
	effective, provenance, reviewer, reviewed, n_reviews`

func scanRecord(sc interface{ Scan(...any) error }) (Record, error) {
	var r Record
	var created, reviewed string
	err := sc.Scan(&r.ID, &r.RunID, &r.Key, &r.ExampleID, &r.QueryID, &r.Question, &r.Target, &r.Snippet, &r.ChunkID,
		&r.DatasetName, &r.Label.Label, &r.Method, &r.Scorer, &r.PPLWithout, &r.PPLWith, &r.Score, &created,
		&r.Effective, &r.Provenance, &r.Reviewer, &reviewed, &r.Reviews)
	if err != nil {
		return r, err
	}
	r.Created, _ = time.Parse(time.RFC3339Nano, created)
	if reviewed != "" {
		r.Reviewed, _ = time.Parse(time.RFC3339Nano, reviewed)
	}
	return r, nil
}

func (s *Store) query(q string, args ...any) ([]Record, error) {
	rows, err := s.db.Query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ErrNotFound reports an unknown label id.
var ErrNotFound = errors.New("label not found")

// Get returns the label with id and its review state. Errors: ErrNotFound.
func (s *Store) Get(id int64) (Record, error) {
	r, err := scanRecord(s.db.QueryRow(`SELECT `+recordCols+` FROM label_effective WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("label %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("label %d: %w", id, err)
	}
	return r, nil
}

// Filter selects labels for List. Zero fields select everything.
type Filter struct {
	RunID  string
	Class  string // effective label, Helpful or NotHelpful
	Method string
	// Disagreement keeps labels whose (question, snippet) Key also has a label of
	// the other automatic method (perplexity vs evidence) with a different
	// effective label, in any run.
	Disagreement bool
	// LowConfidence > 0 keeps perplexity labels with |ppl_with - ppl_without| <
	// LowConfidence (perplexity units), smallest difference first.
	LowConfidence float64
	Reviewed      *bool // when set, keep only reviewed (true) or unreviewed (false) labels
	Limit         int   // 0 = no limit
}

// List returns the labels matching f, in id order (or by confidence, see
// Filter.LowConfidence).
func (s *Store) List(f Filter) ([]Record, error) {
	if f.Class != "" && !filter.ValidLabel(f.Class) {
		return nil, fmt.Errorf("list labels: class %q is neither %s nor %s", f.Class, filter.Helpful, filter.NotHelpful)
	}
	var where []string
	var args []any
	if f.RunID != "" {
		where, args = append(where, "e.run_id = ?"), append(args, f.RunID)
	}
	if f.Class != "" {
		where, args = append(where, "e.effective = ?"), append(args, f.Class)
	}
	if f.Method != "" {
		where, args = append(where, "e.method = ?"), append(args, f.Method)
	}
	if f.Disagreement {
		where = append(where, `e.method IN ('perplexity', 'evidence') AND EXISTS (SELECT 1 FROM label_effective o
			WHERE o.example_key = e.example_key AND o.method IN ('perplexity', 'evidence')
			AND o.method <> e.method AND o.effective <> e.effective)`)
	}
	order := "e.id"
	if f.LowConfidence > 0 {
		where = append(where, "e.method = 'perplexity' AND ABS(e.ppl_with - e.ppl_without) < ?")
		args = append(args, f.LowConfidence)
		order = "ABS(e.ppl_with - e.ppl_without), e.id"
	}
	if f.Reviewed != nil {
		if *f.Reviewed {
			where = append(where, "e.n_reviews > 0")
		} else {
			where = append(where, "e.n_reviews = 0")
		}
	}
	q := `SELECT ` + recordCols + ` FROM label_effective e`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY " + order
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	out, err := s.query(q, args...)
	if err != nil {
		return nil, fmt.Errorf("list labels: %w", err)
	}
	return out, nil
}

// Examples returns the RAG² examples of runID with their effective labels,
// ordered by query id then example id (not storage order), so the export of
// identical runs is identical.
func (s *Store) Examples(runID string) ([]filter.Example, error) {
	recs, err := s.List(Filter{RunID: runID})
	if err != nil {
		return nil, err
	}
	// Concurrent labelers store in completion order; sort by question and
	// example id so identical runs export identical files.
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].QueryID != recs[j].QueryID {
			return recs[i].QueryID < recs[j].QueryID
		}
		return recs[i].ExampleID < recs[j].ExampleID
	})
	out := make([]filter.Example, len(recs))
	for i, r := range recs {
		out[i] = r.Example()
	}
	return out, nil
}

// Export writes the examples of runID (effective labels) to path in format
// (see FormatOf; "" picks by extension) and returns how many it wrote. Errors:
// a run without labels, or a write error (an existing file is then kept).
func (s *Store) Export(runID, path string, format filter.Format) (int, error) {
	f, err := filter.FormatOf(string(format), path)
	if err != nil {
		return 0, fmt.Errorf("export run %q: %w", runID, err)
	}
	exs, err := s.Examples(runID)
	if err != nil {
		return 0, fmt.Errorf("export run %q: %w", runID, err)
	}
	if len(exs) == 0 {
		return 0, fmt.Errorf("export run %q: no labels stored for this run", runID)
	}
	if err := filter.WriteExamples(path, f, exs); err != nil {
		return 0, fmt.Errorf("export run %q: %w", runID, err)
	}
	return len(exs), nil
}

// Counts returns the number of labels of runID per effective class; both
// class tokens are always present.
func (s *Store) Counts(runID string) (map[string]int, error) {
	rows, err := s.db.Query(`SELECT effective, COUNT(*) FROM label_effective WHERE run_id = ? GROUP BY effective`, runID)
	if err != nil {
		return nil, fmt.Errorf("count labels of run %q: %w", runID, err)
	}
	defer rows.Close()
	out := map[string]int{filter.Helpful: 0, filter.NotHelpful: 0}
	for rows.Next() {
		var c string
		var n int
		if err := rows.Scan(&c, &n); err != nil {
			return nil, fmt.Errorf("count labels of run %q: %w", runID, err)
		}
		out[c] = n
	}
	return out, rows.Err()
}

// Change is a Key labeled differently by two runs.
type Change struct {
	Key  string `json:"key"`
	A, B Record
}

// RunDiff compares two runs by Key on effective labels.
type RunDiff struct {
	Changed []Change `json:"changed"`
	OnlyA   []Record `json:"only_a"`
	OnlyB   []Record `json:"only_b"`
	Same    int      `json:"same"`
}

// Diff compares runA with runB: keys in both with different effective labels
// (Changed, in runA id order), keys in only one run, and the count of keys
// with the same label.
func (s *Store) Diff(runA, runB string) (*RunDiff, error) {
	a, err := s.List(Filter{RunID: runA})
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	b, err := s.List(Filter{RunID: runB})
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	inB := make(map[string]Record, len(b))
	for _, r := range b {
		inB[r.Key] = r
	}
	d := &RunDiff{}
	inA := make(map[string]bool, len(a))
	for _, ra := range a {
		inA[ra.Key] = true
		rb, ok := inB[ra.Key]
		switch {
		case !ok:
			d.OnlyA = append(d.OnlyA, ra)
		case ra.Effective != rb.Effective:
			d.Changed = append(d.Changed, Change{Key: ra.Key, A: ra, B: rb})
		default:
			d.Same++
		}
	}
	for _, rb := range b {
		if !inA[rb.Key] {
			d.OnlyB = append(d.OnlyB, rb)
		}
	}
	return d, nil
}
