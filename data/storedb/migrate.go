package storedb

import (
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
)

// Migration brings a store's schema one version up. SQLite is the statement
// text for SQLite; Postgres the text for PostgreSQL, or "" when the SQLite
// text is valid there too. Both must leave the same tables, columns and
// constraints (PostgreSQL may add an id BIGSERIAL where SQLite has its
// implicit rowid, see InsertOrder).
type Migration struct {
	SQLite   string
	Postgres string
}

func (m Migration) text(d Dialect) string {
	if d == Postgres && m.Postgres != "" {
		return m.Postgres
	}
	return m.SQLite
}

// Migrate brings the schema recorded in versionTable (one row, one column
// "version"; created when missing) up to len(migs), in one transaction, and
// returns the version it found. Errors: a version newer than len(migs), a
// failing migration (nothing is applied then).
//
// On SQLite, foreign keys are off while migrations run (a table rebuild must
// not cascade) and checked after; on PostgreSQL an advisory lock keyed by
// versionTable serializes processes that migrate at the same time.
func (d *DB) Migrate(versionTable string, migs []Migration) (int, error) {
	if d.Dialect == SQLite {
		// The pragma is a no-op inside a transaction, hence here, on the one connection.
		if _, err := d.DB.Exec(`PRAGMA foreign_keys = OFF`); err != nil {
			return 0, fmt.Errorf("foreign keys off: %w", err)
		}
		defer d.DB.Exec(`PRAGMA foreign_keys = ON`)
	}
	tx, err := d.Begin()
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if d.Dialect == Postgres {
		h := fnv.New64a()
		h.Write([]byte("ragforge schema " + versionTable))
		if _, err := tx.Exec(`SELECT pg_advisory_xact_lock(?)`, int64(h.Sum64())); err != nil {
			return 0, fmt.Errorf("lock %s: %w", versionTable, err)
		}
	}
	if _, err := tx.Exec(`CREATE TABLE IF NOT EXISTS ` + versionTable + ` (version INTEGER NOT NULL)`); err != nil {
		return 0, fmt.Errorf("create %s: %w", versionTable, err)
	}
	var v int
	err = tx.QueryRow(`SELECT version FROM ` + versionTable).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.Exec(`INSERT INTO ` + versionTable + ` (version) VALUES (0)`); err != nil {
			return 0, fmt.Errorf("init %s: %w", versionTable, err)
		}
	case err != nil:
		return 0, fmt.Errorf("read %s: %w", versionTable, err)
	}
	if v > len(migs) {
		return v, fmt.Errorf("schema version %d is newer than supported %d", v, len(migs))
	}
	for i := v; i < len(migs); i++ {
		if _, err := tx.Exec(migs[i].text(d.Dialect)); err != nil {
			return v, fmt.Errorf("migration %d→%d: %w", i, i+1, err)
		}
	}
	if _, err := tx.Exec(`UPDATE `+versionTable+` SET version = ?`, len(migs)); err != nil {
		return v, fmt.Errorf("update %s: %w", versionTable, err)
	}
	if d.Dialect == SQLite && v < len(migs) {
		var table string
		var rowid sql.NullInt64
		var parent string
		var fkid int
		if err := tx.QueryRow(`PRAGMA foreign_key_check`).Scan(&table, &rowid, &parent, &fkid); err == nil {
			return v, fmt.Errorf("after migration: table %s row %d references missing %s", table, rowid.Int64, parent)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return v, fmt.Errorf("after migration: foreign key check: %w", err)
		}
	}
	return v, tx.Commit()
}
