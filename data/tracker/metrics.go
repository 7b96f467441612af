package tracker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
)

// Metric records value of metric name at step (a training step, epoch or 0).
// Errors: a non-finite value, an unknown run.
func (r *Run) Metric(name string, step int, value float64) error {
	return r.LogMetrics(map[string]float64{name: value}, step)
}

// LogMetrics records several metrics at one step in one transaction (all or
// none). Errors: an empty name, a non-finite value, an unknown run.
func (r *Run) LogMetrics(values map[string]float64, step int) error {
	names := make([]string, 0, len(values))
	for n, v := range values {
		if n == "" {
			return fmt.Errorf("run %s: metric at step %d: empty name", r.ID, step)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("run %s: metric %q step %d: value %v is not finite", r.ID, n, step, v)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	now := r.s.now().Format(timeFormat)
	tx, err := r.s.db.Begin()
	if err != nil {
		return fmt.Errorf("run %s: metrics step %d: %w", r.ID, step, err)
	}
	defer tx.Rollback()
	for _, n := range names {
		if _, err := tx.Exec(`INSERT INTO metrics (run_id, name, step, value, created) VALUES (?, ?, ?, ?, ?)`,
			r.ID, n, step, values[n], now); err != nil {
			return fmt.Errorf("run %s: metric %q step %d: %w", r.ID, n, step, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("run %s: metrics step %d: %w", r.ID, step, err)
	}
	return nil
}

// Artifact records the file at path (stored as an absolute path) under kind
// (e.g. "checkpoint", "trec-run", "report"), with its sha256 (hex) and size in
// bytes computed now. Errors: the file cannot be read, an unknown run.
func (r *Run) Artifact(kind, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("run %s: artifact %s: %w", r.ID, path, err)
	}
	f, err := os.Open(abs)
	if err != nil {
		return fmt.Errorf("run %s: artifact %s: %w", r.ID, path, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("run %s: artifact %s: %w", r.ID, path, err)
	}
	if _, err := r.s.db.Exec(`INSERT INTO artifacts (run_id, kind, path, sha256, bytes, created) VALUES (?, ?, ?, ?, ?, ?)`,
		r.ID, kind, abs, hex.EncodeToString(h.Sum(nil)), n, r.s.now().Format(timeFormat)); err != nil {
		return fmt.Errorf("run %s: artifact %s: %w", r.ID, path, err)
	}
	return nil
}

// TruncateMetrics deletes the run's metrics recorded at steps after step, so
// a run resumed from a checkpoint at step continues its series without
// duplicate steps (what was logged after the checkpoint was lost work).
func (r *Run) TruncateMetrics(step int) error {
	if _, err := r.s.db.Exec(`DELETE FROM metrics WHERE run_id = ? AND step > ?`, r.ID, step); err != nil {
		return fmt.Errorf("run %s: truncate metrics after step %d: %w", r.ID, step, err)
	}
	return nil
}
