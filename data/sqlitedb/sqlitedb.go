// Package sqlitedb opens the SQLite database files of ragforge (the run
// store and the label tables that share it) the one way they are opened:
// a plain file path, WAL journaling, a 10 s busy timeout, foreign keys,
// immediate write transactions, and PRAGMA quick_check before any write.
package sqlitedb

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	sqlite3 "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver
)

// ErrCorrupt is wrapped by the errors of a database that fails
// PRAGMA quick_check or is not a SQLite database.
var ErrCorrupt = errors.New("database is corrupt")

// CorruptError describes a database that failed PRAGMA quick_check: Path is
// the file, Problems the check's first messages (or the open error).
type CorruptError struct {
	Path     string
	Problems []string
}

func (e *CorruptError) Error() string {
	q := shellQuote(e.Path)
	return fmt.Sprintf("%s: %v (PRAGMA quick_check: %s); nothing was written. "+
		"Recover the readable rows into a new file with `sqlite3 %s .recover | sqlite3 fixed.db` "+
		"(where the sqlite3 shell's .recover fails: `sqlite3 %s .dump | sed '$s/^ROLLBACK.*/COMMIT;/' | sqlite3 fixed.db`) "+
		"and use --db fixed.db, or restore a backup copy",
		e.Path, ErrCorrupt, strings.Join(e.Problems, "; "), q, q)
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// DSN returns the go-sqlite3 data source name of the file at path: a file:
// URI whose path is the absolute path percent-escaped, so '#', '?' and '%'
// in a name are literal characters (SQLite parses an unescaped "x#y.db" as
// the file "x"). readOnly opens with mode=ro and query_only (no file is
// created, every write fails).
func DSN(path string, readOnly bool) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	params := "?_journal_mode=WAL&_busy_timeout=10000&_foreign_keys=on&_txlock=immediate"
	if readOnly {
		params = "?mode=ro&_query_only=1&_busy_timeout=10000&_foreign_keys=on"
	}
	return "file:" + escapePath(abs) + params, nil
}

// escapePath percent-escapes every byte of p except unreserved characters and '/'.
func escapePath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~/", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// Open opens (creating when missing, unless readOnly) the database file at
// path with one connection (statements are serialized; several processes
// may share the file, the busy timeout waits for their writes). It does not
// check the file: see Check and OpenChecked.
func Open(path string, readOnly bool) (*sql.DB, error) {
	dsn, err := DSN(path, readOnly)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// Check runs PRAGMA quick_check (O(N), without the index cross-checks of
// integrity_check) on db. It returns a *CorruptError (wrapping ErrCorrupt)
// when the check reports problems or SQLite finds the file malformed or not
// a database, another error when the check cannot run, nil when clean.
func Check(db *sql.DB, path string) error {
	rows, err := db.Query(`PRAGMA quick_check(20)`)
	if err != nil {
		if isCorrupt(err) {
			return &CorruptError{Path: path, Problems: []string{err.Error()}}
		}
		return fmt.Errorf("check %s: %w", path, err)
	}
	defer rows.Close()
	var msgs []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return fmt.Errorf("check %s: %w", path, err)
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		if isCorrupt(err) {
			return &CorruptError{Path: path, Problems: firstLines(append(msgs, err.Error()), 3)}
		}
		return fmt.Errorf("check %s: %w", path, err)
	}
	if len(msgs) == 1 && msgs[0] == "ok" {
		return nil
	}
	return &CorruptError{Path: path, Problems: firstLines(msgs, 3)}
}

// OpenChecked opens the file at path for writing (see Open) and checks it
// (see Check); a corrupt database is closed and its *CorruptError returned,
// so nothing is ever written to it.
func OpenChecked(path string) (*sql.DB, error) {
	db, err := Open(path, false)
	if err != nil {
		return nil, err
	}
	if err := Check(db, path); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// firstLines splits the check's messages (one may hold several lines) into
// lines and keeps the first n, noting how many more there were.
func firstLines(msgs []string, n int) []string {
	var lines []string
	for _, m := range msgs {
		for _, l := range strings.Split(m, "\n") {
			if l = strings.TrimSpace(l); l != "" && l != "*** in database main ***" {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("and %d more", len(lines)-n))
	}
	return lines
}

func isCorrupt(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrCorrupt || se.Code == sqlite3.ErrNotADB)
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._/") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
