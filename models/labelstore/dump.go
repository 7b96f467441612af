package labelstore

import (
	"fmt"
	"time"

	"github.com/ragforge/ragforge/data/storedb"
)

// LabelDump is a stored label with its reviews, oldest first, as Dump reads
// them and Restore writes them back (the row id is not kept: the target
// store numbers its own rows, and reviews follow their label).
type LabelDump struct {
	Label
	Reviews []ReviewRow `json:"reviews,omitempty"`
}

// ReviewRow is a row of label_reviews.
type ReviewRow struct {
	Label      string `json:"label"`
	Provenance string `json:"provenance"`
	Reviewer   string `json:"reviewer"`
	Created    string `json:"created"`
}

// Dump returns the labels of runID in id order, each with its reviews.
func (s *Store) Dump(runID string) ([]LabelDump, error) {
	recs, err := s.List(Filter{RunID: runID})
	if err != nil {
		return nil, fmt.Errorf("dump labels of run %q: %w", runID, err)
	}
	out := make([]LabelDump, len(recs))
	byID := make(map[int64]int, len(recs))
	for i, r := range recs {
		out[i].Label = r.Label
		out[i].ID = 0 // a row number of this store only
		byID[r.ID] = i
	}
	rows, err := s.db.Query(`SELECT r.label_id, r.label, r.provenance, r.reviewer, r.created FROM label_reviews r
		JOIN labels l ON l.id = r.label_id WHERE l.run_id = ? ORDER BY r.id`, runID)
	if err != nil {
		return nil, fmt.Errorf("dump reviews of run %q: %w", runID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var rv ReviewRow
		if err := rows.Scan(&id, &rv.Label, &rv.Provenance, &rv.Reviewer, &rv.Created); err != nil {
			return nil, fmt.Errorf("dump reviews of run %q: %w", runID, err)
		}
		i := byID[id]
		out[i].Reviews = append(out[i].Reviews, rv)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dump reviews of run %q: %w", runID, err)
	}
	return out, nil
}

// Restore writes labels (as Dump returned them) and their reviews within tx,
// in order, keeping every field (created times included). Errors: a label
// the store already has under (run_id, key), a row the schema refuses, each
// naming the label's position and key.
func (s *Store) Restore(tx *storedb.Tx, labels []LabelDump) error {
	for i, l := range labels {
		if err := checkLabel(l.Label); err != nil {
			return fmt.Errorf("restore label %d (key %q): %w", i+1, l.Key, err)
		}
		var id int64
		err := tx.QueryRow(`INSERT INTO labels (run_id, example_key, example_id, query_id, question, target, snippet, chunk_id,
			dataset_name, label, method, scorer, ppl_without, ppl_with, score, created)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			l.RunID, l.Key, l.ExampleID, l.QueryID, l.Question, l.Target, l.Snippet, l.ChunkID, l.DatasetName, l.Label.Label,
			l.Method, l.Scorer, nullIfZero(l.PPLWithout), nullIfZero(l.PPLWith), l.Score, l.Created.UTC().Format(time.RFC3339Nano)).Scan(&id)
		if err != nil {
			return fmt.Errorf("restore label %d (run %s, key %q): %w", i+1, l.RunID, l.Key, err)
		}
		for j, rv := range l.Reviews {
			if _, err := tx.Exec(`INSERT INTO label_reviews (label_id, label, provenance, reviewer, created) VALUES (?, ?, ?, ?, ?)`,
				id, rv.Label, rv.Provenance, rv.Reviewer, rv.Created); err != nil {
				return fmt.Errorf("restore label %d (key %q): review %d: %w", i+1, l.Key, j+1, err)
			}
		}
	}
	return nil
}
