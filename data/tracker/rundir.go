package tracker

import (
	"path/filepath"

	"github.com/ragforge/ragforge/data/storedb"
)

// RunsBase is the folder that holds runs/<id>: the SQLite database db's
// folder, or the working directory when the store is a PostgreSQL server (a
// postgres:// URL).
func RunsBase(db string) string {
	if storedb.IsURL(db) {
		return "."
	}
	return filepath.Dir(db)
}

// RunDir is where a run's files go by default: runs/<id> under
// RunsBase(db).
func RunDir(db, runID string) string {
	return filepath.Join(RunsBase(db), "runs", runID)
}
