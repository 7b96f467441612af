// Package storedb opens the database behind ragforge's stores (the run store
// of data/tracker and the label tables of models/labelstore that share it):
// a SQLite file, the embedded default (opened by data/sqlitedb), or a
// PostgreSQL server named by a postgres:// URL (driver pgx), for runs and
// labels shared by workers on several machines.
//
// SQL is written once, in the subset both engines accept, with '?'
// placeholders; DB and Tx rewrite them to PostgreSQL's $1, $2, … . What the
// subset cannot say (column types in DDL, SQLite's implicit rowid, schema
// changes SQLite cannot ALTER) is per dialect: Migration carries both texts,
// InsertOrder names the insertion-order column.
package storedb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/ragforge/ragforge/data/sqlitedb"
)

// Dialect is the SQL engine behind a DB.
type Dialect int

const (
	SQLite Dialect = iota
	Postgres
)

func (d Dialect) String() string {
	if d == Postgres {
		return "postgres"
	}
	return "sqlite"
}

// IsURL reports whether target names a PostgreSQL server (a postgres:// or
// postgresql:// URL) rather than a SQLite file path.
func IsURL(target string) bool {
	return strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://")
}

// DB is an open store database: the *sql.DB, whose Exec, Query and
// QueryRow (and their Context forms) take '?' placeholders on both dialects.
type DB struct {
	*sql.DB
	Dialect Dialect
	// Name is the SQLite file path, or the URL with its password removed
	// (safe in messages and logs).
	Name string
}

// Open opens the store database named by target: a postgres:// URL connects
// to PostgreSQL (a pool of connections; the server must be reachable), any
// other string is a SQLite file path opened for writing and checked as
// sqlitedb.OpenChecked does (one connection; a corrupt file is refused with
// an error wrapping sqlitedb.ErrCorrupt).
func Open(target string) (*DB, error) {
	if !IsURL(target) {
		db, err := sqlitedb.OpenChecked(target)
		if err != nil {
			return nil, err
		}
		return &DB{DB: db, Dialect: SQLite, Name: target}, nil
	}
	name := Redact(target)
	db, err := sql.Open("pgx", target)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	// A worker holds few statements at once; the server's max_connections
	// (100 by default) is shared by every worker of a job.
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(4)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	return &DB{DB: db, Dialect: Postgres, Name: name}, nil
}

// Wrap returns the SQLite database db (opened by data/sqlitedb) as a DB.
func Wrap(db *sql.DB, name string) *DB { return &DB{DB: db, Dialect: SQLite, Name: name} }

// Redact returns a URL without its password, for messages; a string that
// does not parse as a URL is returned as "<unparsable URL>".
func Redact(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return "<unparsable URL>"
	}
	return u.Redacted()
}

// InsertOrder is the column that orders rows of tables without an explicit
// key by insertion: SQLite's implicit rowid, PostgreSQL's id column (a
// BIGSERIAL the migrations add to such tables).
func (d *DB) InsertOrder() string {
	if d.Dialect == Postgres {
		return "id"
	}
	return "rowid"
}

// Rebind rewrites the '?' placeholders of q for the dialect ($1, $2, … on
// PostgreSQL); a '?' inside a quoted string or identifier is kept.
func (d *DB) Rebind(q string) string { return rebind(d.Dialect, q) }

func rebind(d Dialect, q string) string {
	if d != Postgres || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0 // a doubled quote re-enters the string on the next byte
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func (d *DB) Exec(q string, args ...any) (sql.Result, error) {
	return d.DB.Exec(d.Rebind(q), args...)
}

func (d *DB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return d.DB.ExecContext(ctx, d.Rebind(q), args...)
}

func (d *DB) Query(q string, args ...any) (*sql.Rows, error) {
	return d.DB.Query(d.Rebind(q), args...)
}

func (d *DB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return d.DB.QueryContext(ctx, d.Rebind(q), args...)
}

func (d *DB) QueryRow(q string, args ...any) *sql.Row {
	return d.DB.QueryRow(d.Rebind(q), args...)
}

func (d *DB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return d.DB.QueryRowContext(ctx, d.Rebind(q), args...)
}

// Begin starts a transaction (see BeginTx).
func (d *DB) Begin() (*Tx, error) { return d.BeginTx(context.Background(), nil) }

// BeginTx starts a transaction whose statements take '?' placeholders.
func (d *DB) BeginTx(ctx context.Context, opts *sql.TxOptions) (*Tx, error) {
	tx, err := d.DB.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Tx{Tx: tx, dialect: d.Dialect}, nil
}

// Tx is a transaction of a DB: the *sql.Tx with '?' placeholders.
type Tx struct {
	*sql.Tx
	dialect Dialect
}

func (t *Tx) Exec(q string, args ...any) (sql.Result, error) {
	return t.Tx.Exec(rebind(t.dialect, q), args...)
}

func (t *Tx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.Tx.ExecContext(ctx, rebind(t.dialect, q), args...)
}

func (t *Tx) Query(q string, args ...any) (*sql.Rows, error) {
	return t.Tx.Query(rebind(t.dialect, q), args...)
}

func (t *Tx) QueryRow(q string, args ...any) *sql.Row {
	return t.Tx.QueryRow(rebind(t.dialect, q), args...)
}

func (t *Tx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.Tx.QueryRowContext(ctx, rebind(t.dialect, q), args...)
}

func (t *Tx) Prepare(q string) (*sql.Stmt, error) { return t.Tx.Prepare(rebind(t.dialect, q)) }

func (d *DB) Prepare(q string) (*sql.Stmt, error) { return d.DB.Prepare(d.Rebind(q)) }

func (d *DB) PrepareContext(ctx context.Context, q string) (*sql.Stmt, error) {
	return d.DB.PrepareContext(ctx, d.Rebind(q))
}

func (t *Tx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.Tx.QueryContext(ctx, rebind(t.dialect, q), args...)
}

func (t *Tx) PrepareContext(ctx context.Context, q string) (*sql.Stmt, error) {
	return t.Tx.PrepareContext(ctx, rebind(t.dialect, q))
}
