package tracker

import (
	"database/sql"
	"errors"
	"fmt"
)

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
