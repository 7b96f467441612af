package tracker

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// PutItem stores v (as JSON) under (kind, key) for this run, replacing any
// previous value. See Store.PutItem.
func (r *Run) PutItem(kind, key string, v any) error { return r.s.PutItem(r.ID, kind, key, v) }

// GetItem reads the item (kind, key) of this run into v. See Store.GetItem.
func (r *Run) GetItem(kind, key string, v any) (bool, error) { return r.s.GetItem(r.ID, kind, key, v) }

// Items returns this run's items of kind. See Store.Items.
func (r *Run) Items(kind string) ([]Item, error) { return r.s.Items(r.ID, kind) }

// Item is one stored per-item result.
type Item struct {
	Key     string          `json:"key"`
	JSON    json.RawMessage `json:"json"`
	Updated time.Time       `json:"updated"`
}

// PutItem stores v, encoded with json.Marshal, as the item (runID, kind, key),
// replacing an existing one (the table is unique on run_id, kind, key).
// Errors: v does not encode, an unknown run.
func (s *Store) PutItem(runID, kind, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("run %s: item %s/%s: %w", runID, kind, key, err)
	}
	if _, err := s.db.Exec(`INSERT INTO items (run_id, kind, key, json, updated) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (run_id, kind, key) DO UPDATE SET json = excluded.json, updated = excluded.updated`,
		runID, kind, key, string(b), s.now().Format(timeFormat)); err != nil {
		return fmt.Errorf("run %s: item %s/%s: %w", runID, kind, key, err)
	}
	return nil
}

// GetItem decodes the item (runID, kind, key) into v (json.Unmarshal) and
// reports whether it exists; v is untouched when it does not.
func (s *Store) GetItem(runID, kind, key string, v any) (bool, error) {
	var b string
	err := s.db.QueryRow(`SELECT json FROM items WHERE run_id = ? AND kind = ? AND key = ?`, runID, kind, key).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("run %s: item %s/%s: %w", runID, kind, key, err)
	}
	if err := json.Unmarshal([]byte(b), v); err != nil {
		return true, fmt.Errorf("run %s: item %s/%s: decode: %w", runID, kind, key, err)
	}
	return true, nil
}

// Items returns every item of kind stored for runID, ordered by key.
func (s *Store) Items(runID, kind string) ([]Item, error) {
	rows, err := s.db.Query(`SELECT key, json, updated FROM items WHERE run_id = ? AND kind = ? ORDER BY key`, runID, kind)
	if err != nil {
		return nil, fmt.Errorf("run %s: items %s: %w", runID, kind, err)
	}
	defer rows.Close()
	var out []Item
	for rows.Next() {
		var it Item
		var b, upd string
		if err := rows.Scan(&it.Key, &b, &upd); err != nil {
			return nil, fmt.Errorf("run %s: items %s: %w", runID, kind, err)
		}
		it.JSON = json.RawMessage(b)
		if it.Updated, err = time.Parse(timeFormat, upd); err != nil {
			return nil, fmt.Errorf("run %s: item %s/%s: field %q: %w", runID, kind, it.Key, "updated", err)
		}
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("run %s: items %s: %w", runID, kind, err)
	}
	return out, nil
}
