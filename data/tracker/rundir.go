package tracker

import (
	"path/filepath"

	"github.com/ragforge/ragforge/data/storedb"
)

// RunDir is where a run's files go by default: runs/<id> beside the SQLite
// database db, or in the working directory when the store is a PostgreSQL
// server (a postgres:// URL).
func RunDir(db, runID string) string {
	base := filepath.Dir(db)
	if storedb.IsURL(db) {
		base = "."
	}
	return filepath.Join(base, "runs", runID)
}
