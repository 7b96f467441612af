package tracker

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// RunInfo is one row of the runs table.
//
// Status is computed when the row is read (see Store.status): a run stored
// as running whose process is gone (same host, PID not alive or reused) reads
// as StatusStale. PID and Host name the process that started or last resumed
// the run (0 and "" for runs recorded before they were stored).
type RunInfo struct {
	ID         string          `json:"id"`
	Kind       string          `json:"kind"`
	Config     json.RawMessage `json:"config"`
	Status     string          `json:"status"`
	Error      string          `json:"error,omitempty"`
	StartedAt  time.Time       `json:"started_at"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"` // nil while running
	Version    string          `json:"version"`
	Backend    string          `json:"backend"`
	PID        int             `json:"pid,omitempty"`
	Host       string          `json:"host,omitempty"`

	procToken string
}

// MetricPoint is one recorded metric value.
type MetricPoint struct {
	Name    string    `json:"name"`
	Step    int       `json:"step"`
	Value   float64   `json:"value"`
	Created time.Time `json:"created"`
}

// ArtifactInfo is one recorded artifact.
type ArtifactInfo struct {
	Kind    string    `json:"kind"`
	Path    string    `json:"path"`
	SHA256  string    `json:"sha256"`
	Bytes   int64     `json:"bytes"`
	Created time.Time `json:"created"`
}

// RunDetail is a run with its metrics (by name, then step, then insertion)
// and artifacts (in insertion order).
type RunDetail struct {
	RunInfo
	Metrics   []MetricPoint  `json:"metrics"`
	Artifacts []ArtifactInfo `json:"artifacts"`
}

// ListOptions filters List; zero fields do not filter.
type ListOptions struct {
	Kind   string
	Status string
	Limit  int // at most this many runs; 0 = all
}

// runCols are the columns scanRun reads; a read-only store of schema
// version 1 has no owner columns.
func (s *Store) runCols() string {
	if s.version < 2 {
		return `id, kind, config, status, error, started_at, finished_at, version, backend, 0, '', ''`
	}
	return `id, kind, config, status, error, started_at, finished_at, version, backend, pid, host, proc_token`
}

// status is the one place a run's status is derived for readers: the
// stored status, except that a running run whose owner process is known to
// be gone is StatusStale. Another host's running run stays running (its
// PID cannot be checked here).
func (s *Store) status(ri RunInfo) string {
	if ri.Status != StatusRunning {
		return ri.Status
	}
	if live, _ := alive(owner{PID: ri.PID, Host: ri.Host, Token: ri.procToken}, s.self.Host); !live {
		return StatusStale
	}
	return StatusRunning
}

func (s *Store) scanRun(sc interface{ Scan(...any) error }) (RunInfo, error) {
	var ri RunInfo
	var cfg, started string
	var finished sql.NullString
	if err := sc.Scan(&ri.ID, &ri.Kind, &cfg, &ri.Status, &ri.Error, &started, &finished, &ri.Version, &ri.Backend,
		&ri.PID, &ri.Host, &ri.procToken); err != nil {
		return ri, err
	}
	ri.Status = s.status(ri)
	ri.Config = json.RawMessage(cfg)
	var err error
	if ri.StartedAt, err = time.Parse(timeFormat, started); err != nil {
		return ri, fmt.Errorf("run %s: field %q: %w", ri.ID, "started_at", err)
	}
	if finished.Valid {
		t, err := time.Parse(timeFormat, finished.String)
		if err != nil {
			return ri, fmt.Errorf("run %s: field %q: %w", ri.ID, "finished_at", err)
		}
		ri.FinishedAt = &t
	}
	return ri, nil
}

// Statuses lists the values ListOptions.Status accepts.
var Statuses = []string{StatusRunning, StatusStale, StatusDone, StatusFailed, StatusInterrupted}

// List returns the runs matching opt, newest first (by started_at, then id).
// Status filters on the status readers see (running and stale are told
// apart per row). Errors: an unknown Status, a negative Limit.
func (s *Store) List(opt ListOptions) ([]RunInfo, error) {
	q := `SELECT ` + s.runCols() + ` FROM runs WHERE 1 = 1`
	var args []any
	if opt.Kind != "" {
		q += ` AND kind = ?`
		args = append(args, opt.Kind)
	}
	if opt.Limit < 0 {
		return nil, fmt.Errorf("list runs: limit %d is negative", opt.Limit)
	}
	// Stale is stored as running, so those two filter after the status is derived.
	post := opt.Status == StatusRunning || opt.Status == StatusStale
	switch {
	case opt.Status == "":
	case post:
		q += ` AND status = ?`
		args = append(args, StatusRunning)
	case opt.Status == StatusDone || opt.Status == StatusFailed || opt.Status == StatusInterrupted:
		q += ` AND status = ?`
		args = append(args, opt.Status)
	default:
		return nil, fmt.Errorf("list runs: status %q: want one of %s", opt.Status, strings.Join(Statuses, ", "))
	}
	q += ` ORDER BY started_at DESC, id DESC`
	if opt.Limit > 0 && !post {
		q += ` LIMIT ?`
		args = append(args, opt.Limit)
	}
	rows, err := s.db.Query(q, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []RunInfo
	for rows.Next() {
		ri, err := s.scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		if post && ri.Status != opt.Status {
			continue
		}
		if post && opt.Limit > 0 && len(out) == opt.Limit {
			break
		}
		out = append(out, ri)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// resolve maps an exact id or a unique id prefix to the full id.
func (s *Store) resolve(id string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("run %q: %w", id, ErrNotFound)
	}
	var full string
	err := s.db.QueryRow(`SELECT id FROM runs WHERE id = ?`, id).Scan(&full)
	if err == nil {
		return full, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("run %q: %w", id, err)
	}
	esc := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(id)
	rows, err := s.db.Query(`SELECT id FROM runs WHERE id LIKE ? ESCAPE '\' ORDER BY id LIMIT 3`, esc+"%")
	if err != nil {
		return "", fmt.Errorf("run %q: %w", id, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var x string
		if err := rows.Scan(&x); err != nil {
			return "", fmt.Errorf("run %q: %w", id, err)
		}
		ids = append(ids, x)
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("run %q: %w", id, err)
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("run %q: %w", id, ErrNotFound)
	case 1:
		return ids[0], nil
	default:
		return "", fmt.Errorf("run %q: %w: matches %s, ...", id, ErrAmbiguous, strings.Join(ids[:2], ", "))
	}
}

// info reads the row of the run with the full id.
func (s *Store) info(full string) (RunInfo, error) {
	return s.scanRun(s.db.QueryRow(`SELECT `+s.runCols()+` FROM runs WHERE id = ?`, full))
}

// Get returns a run, by exact id or unique id prefix (LIKE is
// case-insensitive for ASCII), with its metrics and artifacts.
// Errors wrap ErrNotFound or ErrAmbiguous.
func (s *Store) Get(id string) (*RunDetail, error) {
	full, err := s.resolve(id)
	if err != nil {
		return nil, err
	}
	ri, err := s.info(full)
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", full, err)
	}
	d := &RunDetail{RunInfo: ri}
	rows, err := s.db.Query(`SELECT name, step, value, created FROM metrics WHERE run_id = ? ORDER BY name, step, `+s.db.InsertOrder(), full)
	if err != nil {
		return nil, fmt.Errorf("get run %s: metrics: %w", full, err)
	}
	for rows.Next() {
		var m MetricPoint
		var created string
		if err := rows.Scan(&m.Name, &m.Step, &m.Value, &created); err != nil {
			rows.Close()
			return nil, fmt.Errorf("get run %s: metrics: %w", full, err)
		}
		if m.Created, err = time.Parse(timeFormat, created); err != nil {
			rows.Close()
			return nil, fmt.Errorf("get run %s: metric %q: field %q: %w", full, m.Name, "created", err)
		}
		d.Metrics = append(d.Metrics, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("get run %s: metrics: %w", full, err)
	}
	rows, err = s.db.Query(`SELECT kind, path, sha256, bytes, created FROM artifacts WHERE run_id = ? ORDER BY `+s.db.InsertOrder(), full)
	if err != nil {
		return nil, fmt.Errorf("get run %s: artifacts: %w", full, err)
	}
	defer rows.Close()
	for rows.Next() {
		var a ArtifactInfo
		var created string
		if err := rows.Scan(&a.Kind, &a.Path, &a.SHA256, &a.Bytes, &created); err != nil {
			return nil, fmt.Errorf("get run %s: artifacts: %w", full, err)
		}
		if a.Created, err = time.Parse(timeFormat, created); err != nil {
			return nil, fmt.Errorf("get run %s: artifact %s: field %q: %w", full, a.Path, "created", err)
		}
		d.Artifacts = append(d.Artifacts, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("get run %s: artifacts: %w", full, err)
	}
	return d, nil
}

// MetricDiff compares one metric of two runs: the value at the highest step
// recorded in each (the last one logged at that step). Diff = B - A and is
// set only when both runs have the metric.
type MetricDiff struct {
	Name string  `json:"name"`
	A    float64 `json:"a"`
	B    float64 `json:"b"`
	HasA bool    `json:"has_a"`
	HasB bool    `json:"has_b"`
	Diff float64 `json:"diff"`
}

// Compare returns, sorted by name, the metrics of runs a and b (ids or unique
// prefixes) with their final values and differences.
func (s *Store) Compare(a, b string) ([]MetricDiff, error) {
	da, err := s.Get(a)
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	db, err := s.Get(b)
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	byName := map[string]*MetricDiff{}
	get := func(n string) *MetricDiff {
		if byName[n] == nil {
			byName[n] = &MetricDiff{Name: n}
		}
		return byName[n]
	}
	// Metrics are ordered by name, step, insertion: the last point wins.
	for _, m := range da.Metrics {
		d := get(m.Name)
		d.A, d.HasA = m.Value, true
	}
	for _, m := range db.Metrics {
		d := get(m.Name)
		d.B, d.HasB = m.Value, true
	}
	out := make([]MetricDiff, 0, len(byName))
	for _, d := range byName {
		if d.HasA && d.HasB {
			d.Diff = d.B - d.A
		}
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
