// Package storedbtest runs a store test against both engines of
// data/storedb: a SQLite file in a temp directory, and PostgreSQL when
// $RAGFORGE_TEST_POSTGRES holds a server URL (scripts/test-postgres.sh starts
// a throwaway one), each test in its own schema, dropped afterwards. Without
// the variable the PostgreSQL half skips with a message saying so.
package storedbtest

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
)

// EnvPostgres names the variable holding the test server's URL.
const EnvPostgres = "RAGFORGE_TEST_POSTGRES"

// Each runs f as the subtests "sqlite" and "postgres", each with a fresh,
// empty store target (a file path or a URL) that f passes to the store's Open.
func Each(t *testing.T, f func(t *testing.T, target string)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { f(t, SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { f(t, Postgres(t)) })
}

// SQLite returns the path of a new database file in t's temp directory.
func SQLite(t testing.TB) string { return filepath.Join(t.TempDir(), "store.db") }

// Postgres returns the URL of a new, empty schema on the server of
// $RAGFORGE_TEST_POSTGRES (as its search_path), dropped when t ends; t is
// skipped, with the reason, when the variable is unset.
func Postgres(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvPostgres)
	if base == "" {
		t.Skip("PostgreSQL half skipped: $" + EnvPostgres + " is unset (scripts/test-postgres.sh run go test … starts a throwaway server)")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("$%s: %v", EnvPostgres, err)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	schema := "t_" + hex.EncodeToString(rnd[:])
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("$%s: %v", EnvPostgres, err)
	}
	if _, err := db.Exec(`CREATE SCHEMA ` + schema); err != nil {
		db.Close()
		t.Fatalf("$%s: create schema: %v", EnvPostgres, err)
	}
	t.Cleanup(func() {
		db.Exec(`DROP SCHEMA ` + schema + ` CASCADE`)
		db.Close()
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
