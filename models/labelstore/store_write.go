package labelstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ragforge/ragforge/models/filter"
)

// Put stores labels in one transaction, replacing the machine fields of a
// label already stored under the same (RunID, Key) and keeping its id and its
// reviews; it sets each label's ID (and Created when zero). Errors name the
// label's position and field; on error nothing is written.
func (s *Store) Put(labels []Label) error { return s.PutContext(context.Background(), labels) }

// PutContext is Put, stopping at the next label (nothing written, the
// error wrapping ctx.Err()) when ctx is cancelled.
func (s *Store) PutContext(ctx context.Context, labels []Label) error {
	for i, l := range labels {
		if err := checkLabel(l); err != nil {
			return fmt.Errorf("store labels: label %d (key %q): %w", i+1, l.Key, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store labels: %w", err)
	}
	defer tx.Rollback()
	const q = `INSERT INTO labels (run_id, example_key, example_id, query_id, question, target, snippet, chunk_id,
		dataset_name, label, method, scorer, ppl_without, ppl_with, score, created)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id, example_key) DO UPDATE SET example_id = excluded.example_id, query_id = excluded.query_id,
		question = excluded.question, target = excluded.target, snippet = excluded.snippet, chunk_id = excluded.chunk_id,
		dataset_name = excluded.dataset_name, label = excluded.label, method = excluded.method, scorer = excluded.scorer,
		ppl_without = excluded.ppl_without, ppl_with = excluded.ppl_with, score = excluded.score, created = excluded.created
		RETURNING id`
	stmt, err := tx.Prepare(q)
	if err != nil {
		return fmt.Errorf("store labels: %w", err)
	}
	defer stmt.Close()
	ids := make([]int64, len(labels))
	created := make([]time.Time, len(labels))
	for i, l := range labels {
		c := l.Created
		if c.IsZero() {
			c = s.now()
		}
		created[i] = c
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("store labels: stopped at label %d: %w", i+1, err)
		}
		err := stmt.QueryRowContext(ctx, l.RunID, l.Key, l.ExampleID, l.QueryID, l.Question, l.Target, l.Snippet, l.ChunkID,
			l.DatasetName, l.Label, l.Method, l.Scorer, nullIfZero(l.PPLWithout), nullIfZero(l.PPLWith), l.Score,
			c.UTC().Format(time.RFC3339Nano)).Scan(&ids[i])
		if err != nil {
			return fmt.Errorf("store labels: label %d (key %q): %w", i+1, l.Key, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store labels: %w", err)
	}
	for i := range labels {
		labels[i].ID = ids[i]
		labels[i].Created = created[i]
	}
	return nil
}

func checkLabel(l Label) error {
	switch {
	case l.RunID == "":
		return fmt.Errorf("field %q: empty", "run_id")
	case l.Key == "":
		return fmt.Errorf("field %q: empty", "key")
	case l.ExampleID == "":
		return fmt.Errorf("field %q: empty", "id")
	case l.Method == "":
		return fmt.Errorf("field %q: empty", "method")
	case !filter.ValidLabel(l.Label):
		return fmt.Errorf("field %q: label %q is neither %s nor %s", "label", l.Label, filter.Helpful, filter.NotHelpful)
	}
	return nil
}

// Import reads a RAG² JSON/JSONL file (ReadExamples, strict) and stores its
// examples as labels of runID with method "import"; the evidence and question
// come from each example's instruction. A file that fails validation stores
// nothing, and labels already stored are untouched. It returns the stored labels.
func (s *Store) Import(runID, path string) ([]Label, error) {
	return s.ImportContext(context.Background(), runID, path)
}

// ImportContext is Import, storing nothing when ctx is cancelled before the
// labels are committed (the error wraps ctx.Err()).
func (s *Store) ImportContext(ctx context.Context, runID, path string) ([]Label, error) {
	return s.ImportLimit(ctx, runID, path, filter.DefaultMaxExampleBytes)
}

// ImportLimit is ImportContext reading at most maxBytes of the file
// (filter.ReadExamplesLimit): a longer one stores nothing.
func (s *Store) ImportLimit(ctx context.Context, runID, path string, maxBytes int64) ([]Label, error) {
	exs, err := filter.ReadExamplesLimit(path, maxBytes)
	if err != nil {
		return nil, err
	}
	labels := make([]Label, len(exs))
	for i, ex := range exs {
		ev, q, _ := filter.ParseInstruction(ex.Question) // validated by ReadExamples
		labels[i] = Label{RunID: runID, Key: Key(q, "", ev), ExampleID: ex.ID, Question: q, Snippet: ev,
			DatasetName: ex.DatasetName, Label: ex.Answer, Method: MethodImport, Scorer: path}
	}
	if err := s.PutContext(ctx, labels); err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	return labels, nil
}

// Review records a person's decision on label id and returns the updated
// record. action is Helpful or NotHelpful (set that class), ReviewConfirm
// (keep the effective label) or ReviewFlip (switch it). The machine label is
// never changed: the review is a new row of label_reviews with provenance
// "human". Errors: ErrNotFound, an unknown action.
func (s *Store) Review(id int64, action, reviewer string) (Record, error) {
	r, err := s.Get(id)
	if err != nil {
		return r, fmt.Errorf("review: %w", err)
	}
	var lab string
	switch action {
	case filter.Helpful, filter.NotHelpful:
		lab = action
	case ReviewConfirm:
		lab = r.Effective
	case ReviewFlip:
		lab = filter.Helpful
		if r.Effective == filter.Helpful {
			lab = filter.NotHelpful
		}
	default:
		return r, fmt.Errorf("review label %d: action %q is not %s, %s, %q or %q", id, action, filter.Helpful, filter.NotHelpful, ReviewConfirm, ReviewFlip)
	}
	s.mu.Lock()
	_, err = s.db.Exec(`INSERT INTO label_reviews (label_id, label, provenance, reviewer, created) VALUES (?, ?, ?, ?, ?)`,
		id, lab, ProvenanceHuman, reviewer, s.stamp())
	s.mu.Unlock()
	if err != nil {
		return r, fmt.Errorf("review label %d: %w", id, err)
	}
	return s.Get(id)
}

// Undo deletes the latest review of label id and returns the updated record
// (effective label back to the previous review's, or the machine label).
// Errors: ErrNotFound, or a label without reviews.
func (s *Store) Undo(id int64) (Record, error) {
	if _, err := s.Get(id); err != nil {
		return Record{}, fmt.Errorf("undo: %w", err)
	}
	s.mu.Lock()
	res, err := s.db.Exec(`DELETE FROM label_reviews WHERE id = (SELECT MAX(id) FROM label_reviews WHERE label_id = ?)`, id)
	s.mu.Unlock()
	if err != nil {
		return Record{}, fmt.Errorf("undo review of label %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Record{}, fmt.Errorf("undo review of label %d: the label has no review", id)
	}
	return s.Get(id)
}
