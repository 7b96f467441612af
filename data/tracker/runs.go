// Package tracker records experiment runs in one database: each run's kind,
// configuration, status and versions, its metric series, its artifacts (with
// sha256 and size) and per-item results that let long stages resume.
//
// The database is a SQLite file (the default: WAL journaling, a 10 s busy
// timeout and foreign keys; the Store holds one connection, so statements are
// serialized, and several processes may share the file) or a PostgreSQL
// server named by a postgres:// URL (see data/storedb), which workers on
// several machines share. Both have the same schema (migrations), statuses,
// stale detection, resume items and artifacts. All methods are safe for
// concurrent use by several goroutines.
package tracker

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ragforge/ragforge/data/sqlitedb"
	"github.com/ragforge/ragforge/data/storedb"
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

const timeFormat = time.RFC3339Nano

// Store is an open run database.
type Store struct {
	db      *storedb.DB
	now     func() time.Time
	self    owner // this process, recorded with the runs it starts
	version int   // schema version of the file (SchemaVersion unless read-only)
	warning error // why the store is read-only; nil when writable

	mu   sync.Mutex
	open map[string]bool // runs started or resumed here and not finished
}

// Open opens the run database at path for reading and writing and migrates
// its schema to SchemaVersion. path is a postgres:// URL (a PostgreSQL
// server) or a SQLite file path (never a URI: '#', '?' and '%' are literal;
// created if needed and checked with PRAGMA quick_check). Errors name the
// path: a corrupt database (wrapping sqlitedb.ErrCorrupt, with how to
// recover; nothing is written to it), an unreachable server, a
// schema_version newer than this package knows.
func Open(path string) (*Store, error) {
	db, err := storedb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open run store: %w", err)
	}
	s := newStore(db)
	if _, err := db.Migrate("schema_version", migrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("open run store %s: %w", db.Name, err)
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
	sdb, oerr := sqlitedb.Open(path, true)
	if oerr != nil {
		return nil, fmt.Errorf("open run store: %w", oerr)
	}
	db := storedb.Wrap(sdb, path)
	s = newStore(db)
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

func newStore(db *storedb.DB) *Store {
	return &Store{db: db, now: func() time.Time { return time.Now().UTC() }, self: self(), open: map[string]bool{}}
}

// Warning returns why the store was opened read-only by OpenRead (a
// corruption error wrapping sqlitedb.ErrCorrupt), or nil.
func (s *Store) Warning() error { return s.warning }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// DB returns the store's database handle, so other packages (labels, caches)
// keep their own tables in the same database (on SQLite, sharing its single
// connection). Such tables must not be named runs, metrics, artifacts,
// items, work_batches or schema_version.
func (s *Store) DB() *storedb.DB { return s.db }

// Path returns the database file path given to Open, or the server URL
// without its password.
func (s *Store) Path() string { return s.db.Name }

// Dialect returns the engine behind the store.
func (s *Store) Dialect() storedb.Dialect { return s.db.Dialect }

// Check runs SQLite's PRAGMA integrity_check and foreign_key_check and
// returns an error describing the first problems unless both are clean. On
// PostgreSQL, which enforces its constraints on every write and has no such
// check, it only verifies that the server answers.
func (s *Store) Check() error {
	if s.db.Dialect == storedb.Postgres {
		if err := s.db.Ping(); err != nil {
			return fmt.Errorf("check %s: %w", s.db.Name, err)
		}
		return nil
	}
	rows, err := s.db.Query(`PRAGMA integrity_check`)
	if err != nil {
		return fmt.Errorf("integrity check %s: %w", s.db.Name, err)
	}
	var msgs []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			rows.Close()
			return fmt.Errorf("integrity check %s: %w", s.db.Name, err)
		}
		msgs = append(msgs, m)
	}
	rows.Close()
	if len(msgs) != 1 || msgs[0] != "ok" {
		return fmt.Errorf("integrity check %s: %s", s.db.Name, strings.Join(msgs, "; "))
	}
	var table string
	var rowid sql.NullInt64
	var parent string
	var fkid int
	err = s.db.QueryRow(`PRAGMA foreign_key_check`).Scan(&table, &rowid, &parent, &fkid)
	if err == nil {
		return fmt.Errorf("foreign key check %s: table %s row %d references missing %s", s.db.Name, table, rowid.Int64, parent)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("foreign key check %s: %w", s.db.Name, err)
	}
	return nil
}
