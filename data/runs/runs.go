// Package runs records experiment runs in one SQLite database: each run's
// kind, configuration, status and versions, its metric series, its artifacts
// (with sha256 and size) and per-item results that let long stages resume.
//
// The database uses WAL journaling, a 10 s busy timeout and foreign keys; all
// methods are safe for concurrent use by several goroutines (the Store holds
// one connection, so statements are serialized), and several processes may
// share a file (the busy timeout waits for their writes).
package runs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ragforge/ragforge/data/sqlitedb"
)

// Run statuses. Running, done, failed and interrupted are stored; stale is
// computed when a run is read (see RunInfo.Status): a running run whose
// process is gone.
const (
	StatusRunning     = "running"
	StatusDone        = "done"
	StatusFailed      = "failed"
	StatusInterrupted = "interrupted" // stopped by a signal or a cancelled context
	StatusStale       = "stale"       // stored as running, but its process is gone
)

// ErrInterrupted may be wrapped by a run's error to finish it as
// interrupted (context.Canceled does the same).
var ErrInterrupted = errors.New("interrupted")

// ErrLive is returned (wrapped) when a change would take over a run whose
// process is still alive (or runs on another host, where liveness is unknown).
var ErrLive = errors.New("run is still running")

// ErrNotFound is returned (wrapped) when no run matches an id or prefix.
var ErrNotFound = errors.New("run not found")

// ErrAmbiguous is returned (wrapped) when an id prefix matches several runs.
var ErrAmbiguous = errors.New("ambiguous run id prefix")

// migrations[i] brings the schema from version i to i+1.
var migrations = []string{
	`CREATE TABLE runs (
		id          TEXT PRIMARY KEY,
		kind        TEXT NOT NULL,
		config      TEXT NOT NULL,
		status      TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),
		error       TEXT NOT NULL DEFAULT '',
		started_at  TEXT NOT NULL,
		finished_at TEXT,
		version     TEXT NOT NULL,
		backend     TEXT NOT NULL
	);
	CREATE INDEX runs_started ON runs (started_at);
	CREATE TABLE metrics (
		run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
		name    TEXT NOT NULL,
		step    INTEGER NOT NULL,
		value   REAL NOT NULL,
		created TEXT NOT NULL
	);
	CREATE INDEX metrics_run ON metrics (run_id, name, step);
	CREATE TABLE artifacts (
		run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
		kind    TEXT NOT NULL,
		path    TEXT NOT NULL,
		sha256  TEXT NOT NULL,
		bytes   INTEGER NOT NULL,
		created TEXT NOT NULL
	);
	CREATE INDEX artifacts_run ON artifacts (run_id);
	CREATE TABLE items (
		run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
		kind    TEXT NOT NULL,
		key     TEXT NOT NULL,
		json    TEXT NOT NULL,
		updated TEXT NOT NULL,
		PRIMARY KEY (run_id, kind, key)
	);`,
	// 2: status interrupted, and the owner process (pid, host, proc_token;
	// see owner) that tells a stale run. SQLite cannot alter a CHECK: the
	// table is rebuilt (migrate turns foreign keys off around it).
	`CREATE TABLE runs_new (
		id          TEXT PRIMARY KEY,
		kind        TEXT NOT NULL,
		config      TEXT NOT NULL,
		status      TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'interrupted')),
		error       TEXT NOT NULL DEFAULT '',
		started_at  TEXT NOT NULL,
		finished_at TEXT,
		version     TEXT NOT NULL,
		backend     TEXT NOT NULL,
		pid         INTEGER NOT NULL DEFAULT 0,
		host        TEXT NOT NULL DEFAULT '',
		proc_token  TEXT NOT NULL DEFAULT ''
	);
	INSERT INTO runs_new (id, kind, config, status, error, started_at, finished_at, version, backend)
		SELECT id, kind, config, status, error, started_at, finished_at, version, backend FROM runs;
	DROP TABLE runs;
	ALTER TABLE runs_new RENAME TO runs;
	CREATE INDEX runs_started ON runs (started_at);`,
}

// SchemaVersion is the schema version Open migrates to.
var SchemaVersion = len(migrations)

const timeFormat = time.RFC3339Nano

// Store is an open run database.
type Store struct {
	db      *sql.DB
	path    string
	now     func() time.Time
	self    owner // this process, recorded with the runs it starts
	version int   // schema version of the file (SchemaVersion unless read-only)
	warning error // why the store is read-only; nil when writable

	mu   sync.Mutex
	open map[string]bool // runs started or resumed here and not finished
}

// Open opens (creating if needed) the run database file at path (a file
// path, never a URI: '#', '?' and '%' are literal) for reading and writing,
// checks it with PRAGMA quick_check and migrates its schema to
// SchemaVersion. Errors name the path: a corrupt database (wrapping
// sqlitedb.ErrCorrupt, with how to recover; nothing is written to it), a
// schema_version newer than this package knows.
func Open(path string) (*Store, error) {
	db, err := sqlitedb.OpenChecked(path)
	if err != nil {
		return nil, fmt.Errorf("open run store: %w", err)
	}
	s := newStore(db, path)
	if err := s.migrate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open run store %s: %w", path, err)
	}
	s.version = len(migrations)
	return s, nil
}

// OpenRead opens the run database at path for commands that only read. A
// healthy file is opened as by Open. A file that fails PRAGMA quick_check
// is opened read-only (every write fails) and Warning returns the
// corruption error, so what is still readable can be listed.
func OpenRead(path string) (*Store, error) {
	s, err := Open(path)
	if err == nil || !errors.Is(err, sqlitedb.ErrCorrupt) {
		return s, err
	}
	db, oerr := sqlitedb.Open(path, true)
	if oerr != nil {
		return nil, fmt.Errorf("open run store: %w", oerr)
	}
	s = newStore(db, path)
	s.warning = errors.Unwrap(err) // the *sqlitedb.CorruptError under Open's context
	if s.warning == nil {
		s.warning = err
	}
	if verr := db.QueryRow(`SELECT version FROM schema_version`).Scan(&s.version); verr != nil {
		db.Close()
		return nil, fmt.Errorf("open run store %s read-only: schema version: %v (after %w)", path, verr, err)
	}
	return s, nil
}

func newStore(db *sql.DB, path string) *Store {
	return &Store{db: db, path: path, now: func() time.Time { return time.Now().UTC() }, self: self(), open: map[string]bool{}}
}

// Warning returns why the store was opened read-only by OpenRead (a
// corruption error wrapping sqlitedb.ErrCorrupt), or nil.
func (s *Store) Warning() error { return s.warning }

func (s *Store) migrate() error {
	// A table rebuild (migration 2) must not cascade into metrics; the
	// pragma is a no-op inside a transaction, hence here, on the one connection.
	if _, err := s.db.Exec(`PRAGMA foreign_keys = OFF`); err != nil {
		return fmt.Errorf("foreign keys off: %w", err)
	}
	defer s.db.Exec(`PRAGMA foreign_keys = ON`)
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_version: %w", err)
	}
	var v int
	err = tx.QueryRow(`SELECT version FROM schema_version`).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.Exec(`INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return fmt.Errorf("init schema_version: %w", err)
		}
	case err != nil:
		return fmt.Errorf("read schema_version: %w", err)
	}
	if v > len(migrations) {
		return fmt.Errorf("schema version %d is newer than supported %d", v, len(migrations))
	}
	for i := v; i < len(migrations); i++ {
		if _, err := tx.Exec(migrations[i]); err != nil {
			return fmt.Errorf("migration %d→%d: %w", i, i+1, err)
		}
	}
	if _, err := tx.Exec(`UPDATE schema_version SET version = ?`, len(migrations)); err != nil {
		return fmt.Errorf("update schema_version: %w", err)
	}
	if v < len(migrations) {
		var table string
		var rowid sql.NullInt64
		var parent string
		var fkid int
		if err := tx.QueryRow(`PRAGMA foreign_key_check`).Scan(&table, &rowid, &parent, &fkid); err == nil {
			return fmt.Errorf("after migration: table %s row %d references missing %s", table, rowid.Int64, parent)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("after migration: foreign key check: %w", err)
		}
	}
	return tx.Commit()
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// DB returns the store's database handle, so other packages (labels, caches)
// keep their own tables in the same file and share its single connection.
// Such tables must not be named runs, metrics, artifacts, items or
// schema_version.
func (s *Store) DB() *sql.DB { return s.db }

// Path returns the database file path given to Open.
func (s *Store) Path() string { return s.path }

// Check runs SQLite's PRAGMA integrity_check and foreign_key_check and
// returns an error describing the first problems unless both are clean.
func (s *Store) Check() error {
	rows, err := s.db.Query(`PRAGMA integrity_check`)
	if err != nil {
		return fmt.Errorf("integrity check %s: %w", s.path, err)
	}
	var msgs []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			rows.Close()
			return fmt.Errorf("integrity check %s: %w", s.path, err)
		}
		msgs = append(msgs, m)
	}
	rows.Close()
	if len(msgs) != 1 || msgs[0] != "ok" {
		return fmt.Errorf("integrity check %s: %s", s.path, strings.Join(msgs, "; "))
	}
	var table string
	var rowid sql.NullInt64
	var parent string
	var fkid int
	err = s.db.QueryRow(`PRAGMA foreign_key_check`).Scan(&table, &rowid, &parent, &fkid)
	if err == nil {
		return fmt.Errorf("foreign key check %s: table %s row %d references missing %s", s.path, table, rowid.Int64, parent)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("foreign key check %s: %w", s.path, err)
	}
	return nil
}

// Run is a handle on one stored run, returned by Start or Attach.
type Run struct {
	ID string
	s  *Store
}

// newID returns "YYYYMMDD-HHMMSS-<kind>-<4 hex>", kind lower-cased with
// characters outside [a-z0-9] turned to '-' and cut to 24 bytes.
func newID(t time.Time, kind string) (string, error) {
	var b strings.Builder
	for _, r := range strings.ToLower(kind) {
		if b.Len() >= 24 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	var rnd [2]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-%s-%s", t.Format("20060102-150405"), b.String(), hex.EncodeToString(rnd[:])), nil
}

// Start records a new run with status "running", owned by this process
// (PID, host name and process start time, so readers can tell a stale run).
// config is stored as JSON
// (json.Marshal); version is the ragforge version string and backend names
// the compute backend (e.g. "simplego", "xla:cuda"). The id is
// "YYYYMMDD-HHMMSS-<kind>-<4 hex>" in UTC; a rare id clash is retried.
func (s *Store) Start(kind string, config any, version, backend string) (*Run, error) {
	if kind == "" {
		return nil, fmt.Errorf("start run: field %q: empty", "kind")
	}
	cfg, err := json.Marshal(config)
	if err != nil {
		return nil, fmt.Errorf("start run %s: field %q: %w", kind, "config", err)
	}
	now := s.now()
	for attempt := 0; ; attempt++ {
		id, err := newID(now, kind)
		if err != nil {
			return nil, fmt.Errorf("start run %s: id: %w", kind, err)
		}
		res, err := s.db.Exec(`INSERT OR IGNORE INTO runs (id, kind, config, status, started_at, version, backend, pid, host, proc_token)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, kind, string(cfg), StatusRunning, now.Format(timeFormat), version, backend,
			s.self.PID, s.self.Host, s.self.Token)
		if err != nil {
			return nil, fmt.Errorf("start run %s: %w", kind, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			s.setOpen(id, true)
			return &Run{ID: id, s: s}, nil
		}
		if attempt > 16 {
			return nil, fmt.Errorf("start run %s: could not find a free id", kind)
		}
	}
}

// Attach returns a handle on an existing run (id or unique id prefix) without
// changing it, e.g. to resume a stage from its stored items.
func (s *Store) Attach(id string) (*Run, error) {
	full, err := s.resolve(id)
	if err != nil {
		return nil, err
	}
	return &Run{ID: full, s: s}, nil
}

// Resume reopens an existing run (id or unique id prefix) to continue it in
// this process: status running again, error and finished_at cleared, this
// process recorded as its owner. Errors wrap ErrNotFound, ErrAmbiguous, or
// ErrLive when the run is running in a live process (or on another host);
// close that one first (MarkRun with force).
func (s *Store) Resume(id string) (*Run, error) {
	full, err := s.resolve(id)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	tx, err := s.db.Begin()
	if err != nil {
		return nil, fmt.Errorf("resume run %s: %w", full, err)
	}
	defer tx.Rollback()
	var status string
	var o owner
	if err := tx.QueryRow(`SELECT status, pid, host, proc_token FROM runs WHERE id = ?`, full).Scan(&status, &o.PID, &o.Host, &o.Token); err != nil {
		return nil, fmt.Errorf("resume run %s: %w", full, err)
	}
	if status == StatusRunning && o != s.self {
		if live, known := alive(o, s.self.Host); live {
			return nil, fmt.Errorf("resume run %s: %w (pid %d on host %s%s); stop it, or close it with `ragforge runs mark %s --status interrupted --force`",
				full, ErrLive, o.PID, o.Host, unknownNote(known), full)
		}
	}
	if _, err := tx.Exec(`UPDATE runs SET status = ?, error = '', finished_at = NULL, pid = ?, host = ?, proc_token = ? WHERE id = ?`,
		StatusRunning, s.self.PID, s.self.Host, s.self.Token, full); err != nil {
		return nil, fmt.Errorf("resume run %s: %w", full, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("resume run %s: %w", full, err)
	}
	s.setOpen(full, true)
	return &Run{ID: full, s: s}, nil
}

func unknownNote(known bool) string {
	if known {
		return ""
	}
	return ", liveness unknown from this host"
}

func (s *Store) setOpen(id string, open bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if open {
		s.open[id] = true
	} else {
		delete(s.open, id)
	}
}

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

// Finish marks the run done when runErr is nil, interrupted when runErr
// wraps context.Canceled or ErrInterrupted, failed otherwise (error =
// runErr's text), and sets finished_at. Errors: the run is unknown or
// already finished.
func (r *Run) Finish(runErr error) error {
	status, msg := StatusDone, ""
	switch {
	case runErr == nil:
	case errors.Is(runErr, context.Canceled) || errors.Is(runErr, ErrInterrupted):
		status, msg = StatusInterrupted, runErr.Error()
	default:
		status, msg = StatusFailed, runErr.Error()
	}
	return r.s.end(context.Background(), r.ID, status, msg)
}

// end moves the running run id to status with msg.
func (s *Store) end(ctx context.Context, id, status, msg string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE runs SET status = ?, error = ?, finished_at = ? WHERE id = ? AND status = ?`,
		status, msg, s.now().Format(timeFormat), id, StatusRunning)
	if err != nil {
		return fmt.Errorf("run %s: finish: %w", id, err)
	}
	s.setOpen(id, false)
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("run %s: finish: not a running run", id)
	}
	return nil
}

// OpenRuns returns the ids of the runs this Store started or resumed and has
// not finished, sorted.
func (s *Store) OpenRuns() []string {
	s.mu.Lock()
	ids := make([]string, 0, len(s.open))
	for id := range s.open {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	sort.Strings(ids)
	return ids
}

// InterruptOpen marks every run this Store started or resumed and has not
// finished as interrupted with msg, for a process that must exit before its
// commands return (a second signal, a command that ignores cancellation).
// ctx bounds the wait for the database. It returns the ids it marked.
func (s *Store) InterruptOpen(ctx context.Context, msg string) ([]string, error) {
	var done []string
	for _, id := range s.OpenRuns() {
		if err := s.end(ctx, id, StatusInterrupted, msg); err != nil {
			return done, err
		}
		done = append(done, id)
	}
	return done, nil
}

// MarkRun closes run id (or unique prefix) by hand with status done, failed
// or interrupted and message msg (the error text; empty for done), setting
// finished_at when it was unset. A run that is running in a live process,
// or on another host, is refused with ErrLive unless force. It returns the
// full id. Errors also wrap ErrNotFound and ErrAmbiguous.
func (s *Store) MarkRun(id, status, msg string, force bool) (string, error) {
	switch status {
	case StatusDone, StatusFailed, StatusInterrupted:
	default:
		return "", fmt.Errorf("mark run %s: status %q: want %s, %s or %s", id, status, StatusDone, StatusFailed, StatusInterrupted)
	}
	full, err := s.resolve(id)
	if err != nil {
		return "", fmt.Errorf("mark: %w", err)
	}
	ri, err := s.info(full)
	if err != nil {
		return "", fmt.Errorf("mark run %s: %w", full, err)
	}
	if ri.Status == StatusRunning && !force {
		return "", fmt.Errorf("mark run %s: %w (pid %d on host %s%s); pass --force to mark it anyway",
			full, ErrLive, ri.PID, ri.Host, unknownNote(ri.Host == s.self.Host))
	}
	if status == StatusDone {
		msg = ""
	}
	if _, err := s.db.Exec(`UPDATE runs SET status = ?, error = ?, finished_at = COALESCE(finished_at, ?) WHERE id = ?`,
		status, msg, s.now().Format(timeFormat), full); err != nil {
		return "", fmt.Errorf("mark run %s: %w", full, err)
	}
	s.setOpen(full, false)
	return full, nil
}

// MarkStale marks every stale run (see RunInfo.Status) failed with a message
// naming its lost process, and returns their ids, oldest first.
func (s *Store) MarkStale() ([]string, error) {
	rs, err := s.List(ListOptions{Status: StatusStale})
	if err != nil {
		return nil, fmt.Errorf("mark stale runs: %w", err)
	}
	var ids []string
	for i := len(rs) - 1; i >= 0; i-- {
		r := rs[i]
		msg := fmt.Sprintf("stale: process %d on host %s is gone (marked failed by runs gc)", r.PID, r.Host)
		res, err := s.db.Exec(`UPDATE runs SET status = ?, error = ?, finished_at = ? WHERE id = ? AND status = ? AND pid = ? AND proc_token = ?`,
			StatusFailed, msg, s.now().Format(timeFormat), r.ID, StatusRunning, r.PID, r.procToken)
		if err != nil {
			return ids, fmt.Errorf("mark stale run %s: %w", r.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			ids = append(ids, r.ID)
		}
	}
	return ids, nil
}

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
