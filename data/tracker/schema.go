package tracker

import "github.com/ragforge/ragforge/data/storedb"

// migrations[i] brings the schema from version i to i+1, on SQLite and on
// PostgreSQL (whose texts differ in column types: BIGINT and DOUBLE
// PRECISION for SQLite's 64-bit INTEGER and REAL, and an id BIGSERIAL where
// SQLite orders by its implicit rowid; and in how a CHECK is changed).
var migrations = []storedb.Migration{
	{SQLite: `CREATE TABLE runs (
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
	);`, Postgres: `CREATE TABLE runs (
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
		id      BIGSERIAL PRIMARY KEY,
		run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
		name    TEXT NOT NULL,
		step    BIGINT NOT NULL,
		value   DOUBLE PRECISION NOT NULL,
		created TEXT NOT NULL
	);
	CREATE INDEX metrics_run ON metrics (run_id, name, step);
	CREATE TABLE artifacts (
		id      BIGSERIAL PRIMARY KEY,
		run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
		kind    TEXT NOT NULL,
		path    TEXT NOT NULL,
		sha256  TEXT NOT NULL,
		bytes   BIGINT NOT NULL,
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
	);`},
	// 2: status interrupted, and the owner process (pid, host, proc_token;
	// see owner) that tells a stale run. SQLite cannot alter a CHECK: the
	// table is rebuilt (Migrate turns foreign keys off around it).
	{SQLite: `CREATE TABLE runs_new (
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
	CREATE INDEX runs_started ON runs (started_at);`, Postgres: `ALTER TABLE runs DROP CONSTRAINT runs_status_check;
	ALTER TABLE runs ADD CONSTRAINT runs_status_check CHECK (status IN ('running', 'done', 'failed', 'interrupted'));
	ALTER TABLE runs ADD COLUMN pid BIGINT NOT NULL DEFAULT 0;
	ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT '';
	ALTER TABLE runs ADD COLUMN proc_token TEXT NOT NULL DEFAULT '';`},
}

// SchemaVersion is the schema version Open migrates to.
var SchemaVersion = len(migrations)
