package tracker

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/ragforge/ragforge/data/storedb"
)

// ErrExists is returned (wrapped) by Restore when the run id is already stored.
var ErrExists = errors.New("run already exists")

// RunDump is one run as stored, every column verbatim (times are the stored
// RFC 3339 texts), so that Restore into another store (SQLite or
// PostgreSQL) gives back the same rows. Metrics and artifacts are in
// insertion order, items by (kind, key).
type RunDump struct {
	Run       RunRow        `json:"run"`
	Metrics   []MetricRow   `json:"metrics"`
	Artifacts []ArtifactRow `json:"artifacts"`
	Items     []ItemRow     `json:"items"`
}

// RunRow is a row of runs; Status is the stored one (never "stale").
type RunRow struct {
	ID         string  `json:"id"`
	Kind       string  `json:"kind"`
	Config     string  `json:"config"`
	Status     string  `json:"status"`
	Error      string  `json:"error"`
	StartedAt  string  `json:"started_at"`
	FinishedAt *string `json:"finished_at"`
	Version    string  `json:"version"`
	Backend    string  `json:"backend"`
	PID        int64   `json:"pid"`
	Host       string  `json:"host"`
	ProcToken  string  `json:"proc_token"`
}

// MetricRow is a row of metrics.
type MetricRow struct {
	Name    string  `json:"name"`
	Step    int64   `json:"step"`
	Value   float64 `json:"value"`
	Created string  `json:"created"`
}

// ArtifactRow is a row of artifacts.
type ArtifactRow struct {
	Kind    string `json:"kind"`
	Path    string `json:"path"`
	SHA256  string `json:"sha256"`
	Bytes   int64  `json:"bytes"`
	Created string `json:"created"`
}

// ItemRow is a row of items.
type ItemRow struct {
	Kind    string `json:"kind"`
	Key     string `json:"key"`
	JSON    string `json:"json"`
	Updated string `json:"updated"`
}

// Dump reads run id (or unique prefix) with its metrics, artifacts and
// items. Errors wrap ErrNotFound or ErrAmbiguous.
func (s *Store) Dump(id string) (*RunDump, error) {
	full, err := s.resolve(id)
	if err != nil {
		return nil, fmt.Errorf("dump: %w", err)
	}
	d := &RunDump{}
	r := &d.Run
	var fin sql.NullString
	if err := s.db.QueryRow(`SELECT `+s.runCols()+` FROM runs WHERE id = ?`, full).Scan(&r.ID, &r.Kind, &r.Config, &r.Status,
		&r.Error, &r.StartedAt, &fin, &r.Version, &r.Backend, &r.PID, &r.Host, &r.ProcToken); err != nil {
		return nil, fmt.Errorf("dump run %s: %w", full, err)
	}
	if fin.Valid {
		r.FinishedAt = &fin.String
	}
	order := s.db.InsertOrder()
	if err := scanAll(s.db, `SELECT name, step, value, created FROM metrics WHERE run_id = ? ORDER BY `+order, full,
		func(sc scanner) error {
			var m MetricRow
			err := sc.Scan(&m.Name, &m.Step, &m.Value, &m.Created)
			d.Metrics = append(d.Metrics, m)
			return err
		}); err != nil {
		return nil, fmt.Errorf("dump run %s: metrics: %w", full, err)
	}
	if err := scanAll(s.db, `SELECT kind, path, sha256, bytes, created FROM artifacts WHERE run_id = ? ORDER BY `+order, full,
		func(sc scanner) error {
			var a ArtifactRow
			err := sc.Scan(&a.Kind, &a.Path, &a.SHA256, &a.Bytes, &a.Created)
			d.Artifacts = append(d.Artifacts, a)
			return err
		}); err != nil {
		return nil, fmt.Errorf("dump run %s: artifacts: %w", full, err)
	}
	if err := scanAll(s.db, `SELECT kind, key, json, updated FROM items WHERE run_id = ? ORDER BY kind, key`, full,
		func(sc scanner) error {
			var it ItemRow
			err := sc.Scan(&it.Kind, &it.Key, &it.JSON, &it.Updated)
			d.Items = append(d.Items, it)
			return err
		}); err != nil {
		return nil, fmt.Errorf("dump run %s: items: %w", full, err)
	}
	return d, nil
}

type scanner interface{ Scan(...any) error }

func scanAll(db *storedb.DB, q, arg string, row func(scanner) error) error {
	rows, err := db.Query(q, arg)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Restore writes d into the store within tx (from s.DB().Begin, so a caller
// may add the run's labels to the same transaction): the run row verbatim,
// then its metrics and artifacts in order, and its items. Errors: the run id
// is already stored (wrapping ErrExists), a row the schema refuses (named by
// its table and position).
func (s *Store) Restore(tx *storedb.Tx, d *RunDump) error {
	r := d.Run
	res, err := tx.Exec(`INSERT INTO runs (id, kind, config, status, error, started_at, finished_at, version, backend, pid, host, proc_token)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		r.ID, r.Kind, r.Config, r.Status, r.Error, r.StartedAt, r.FinishedAt, r.Version, r.Backend, r.PID, r.Host, r.ProcToken)
	if err != nil {
		return fmt.Errorf("restore run %s: %w", r.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("restore run %s: %w", r.ID, ErrExists)
	}
	for i, m := range d.Metrics {
		if _, err := tx.Exec(`INSERT INTO metrics (run_id, name, step, value, created) VALUES (?, ?, ?, ?, ?)`,
			r.ID, m.Name, m.Step, m.Value, m.Created); err != nil {
			return fmt.Errorf("restore run %s: metric %d (%q): %w", r.ID, i+1, m.Name, err)
		}
	}
	for i, a := range d.Artifacts {
		if _, err := tx.Exec(`INSERT INTO artifacts (run_id, kind, path, sha256, bytes, created) VALUES (?, ?, ?, ?, ?, ?)`,
			r.ID, a.Kind, a.Path, a.SHA256, a.Bytes, a.Created); err != nil {
			return fmt.Errorf("restore run %s: artifact %d (%s): %w", r.ID, i+1, a.Path, err)
		}
	}
	for i, it := range d.Items {
		if _, err := tx.Exec(`INSERT INTO items (run_id, kind, key, json, updated) VALUES (?, ?, ?, ?, ?)`,
			r.ID, it.Kind, it.Key, it.JSON, it.Updated); err != nil {
			return fmt.Errorf("restore run %s: item %d (%s/%s): %w", r.ID, i+1, it.Kind, it.Key, err)
		}
	}
	return nil
}
