// Package labelstore keeps the RAG² filter's machine labels (in the run
// store's database, SQLite or PostgreSQL, see data/storedb) with
// their provenance, the human review queue beside them (reviews never
// overwrite a machine label) and the scorers' log-probability cache, so an
// interrupted labeling run resumes without rescoring finished pairs.
// Labelers (package label) write it; the review API (infer/labelapi), the
// server (infer/serve) and the workbench (infer/web) read and review it.
// Examples are exported and imported in models/filter's schema.
package labelstore

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/ragforge/ragforge/models/filter"

	"github.com/ragforge/ragforge/data/storedb"
)

// Label is one machine label with its provenance.
//
// Key identifies the (question, snippet) pair across runs and methods (see
// Key). PPLWithout/PPLWith are the scorer's perplexities of Target without and
// with the snippet (0 when Method is not "perplexity"). Score is the
// perplexity reduction the decision used (absolute or relative, see
// PerplexityLabeler) for perplexity labels, and the retriever's score for
// evidence labels.
type Label struct {
	ID          int64     `json:"label_id,omitempty"` // Store row id; 0 before storing
	RunID       string    `json:"run_id"`
	Key         string    `json:"key"`
	ExampleID   string    `json:"id"`
	QueryID     string    `json:"query_id,omitempty"`
	Question    string    `json:"question"`
	Target      string    `json:"target,omitempty"` // rationale / reference answer scored
	Snippet     string    `json:"snippet"`
	ChunkID     string    `json:"chunk_id,omitempty"`
	DatasetName string    `json:"dataset_name,omitempty"`
	Label       string    `json:"label"` // machine label: Helpful or NotHelpful
	Method      string    `json:"method"`
	Scorer      string    `json:"scorer,omitempty"`
	PPLWithout  float64   `json:"ppl_without,omitempty"`
	PPLWith     float64   `json:"ppl_with,omitempty"`
	Score       float64   `json:"score"`
	Created     time.Time `json:"created"`
}

// Example returns the RAG² record of l with its machine label.
func (l Label) Example() filter.Example {
	return filter.Example{ID: l.ExampleID, Question: filter.Instruction(l.Snippet, l.Question), Answer: l.Label, DatasetName: l.DatasetName}
}

// Record is a stored label with its review state. Effective is the label of
// the latest review when there is one, else the machine label; Provenance is
// "human" or "machine" accordingly.
type Record struct {
	Label
	Effective  string    `json:"effective"`
	Provenance string    `json:"provenance"`
	Reviewer   string    `json:"reviewer,omitempty"`
	Reviewed   time.Time `json:"reviewed,omitzero"`
	Reviews    int       `json:"reviews"`
}

// Example returns the RAG² record of r with its effective label.
func (r Record) Example() filter.Example {
	ex := r.Label.Example()
	ex.Answer = r.Effective
	return ex
}

// Provenance values.
const (
	ProvenanceMachine = "machine"
	ProvenanceHuman   = "human"
)

// Review actions besides the two class tokens.
const (
	ReviewConfirm = "confirm" // keep the effective label, marked as checked by a person
	ReviewFlip    = "flip"    // switch the effective label to the other class
)

// migrations[i] brings the label tables from version i to i+1 (recorded in
// label_schema_version). Version 1 is the schema of files made before
// versions were recorded, hence IF NOT EXISTS. The PostgreSQL text differs in
// column types (BIGSERIAL, BIGINT, DOUBLE PRECISION) and CREATE OR REPLACE VIEW.
var migrations = []storedb.Migration{
	{SQLite: `
CREATE TABLE IF NOT EXISTS labels (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	run_id       TEXT NOT NULL,
	example_key  TEXT NOT NULL,
	example_id   TEXT NOT NULL,
	query_id     TEXT NOT NULL DEFAULT '',
	question     TEXT NOT NULL,
	target       TEXT NOT NULL DEFAULT '',
	snippet      TEXT NOT NULL,
	chunk_id     TEXT NOT NULL DEFAULT '',
	dataset_name TEXT NOT NULL DEFAULT '',
	label        TEXT NOT NULL CHECK (label IN ('[HELPFUL]', '[NOT_HELPFUL]')),
	method       TEXT NOT NULL,
	scorer       TEXT NOT NULL DEFAULT '',
	ppl_without  REAL,
	ppl_with     REAL,
	score        REAL NOT NULL DEFAULT 0,
	created      TEXT NOT NULL,
	UNIQUE (run_id, example_key)
);
CREATE INDEX IF NOT EXISTS labels_key ON labels (example_key);
CREATE TABLE IF NOT EXISTS label_reviews (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	label_id   INTEGER NOT NULL REFERENCES labels (id),
	label      TEXT NOT NULL CHECK (label IN ('[HELPFUL]', '[NOT_HELPFUL]')),
	provenance TEXT NOT NULL DEFAULT 'human',
	reviewer   TEXT NOT NULL DEFAULT '',
	created    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS label_reviews_label ON label_reviews (label_id);
CREATE TABLE IF NOT EXISTS score_cache (
	scorer     TEXT NOT NULL,
	prompt_sha TEXT NOT NULL,
	target_sha TEXT NOT NULL,
	logprobs   TEXT NOT NULL,
	created    TEXT NOT NULL,
	UNIQUE (scorer, prompt_sha, target_sha)
);
CREATE VIEW IF NOT EXISTS label_effective AS
SELECT l.id, l.run_id, l.example_key, l.example_id, l.query_id, l.question, l.target, l.snippet,
	l.chunk_id, l.dataset_name, l.label, l.method, l.scorer, l.ppl_without, l.ppl_with, l.score, l.created,
	COALESCE(r.label, l.label) AS effective,
	CASE WHEN r.id IS NULL THEN 'machine' ELSE r.provenance END AS provenance,
	COALESCE(r.reviewer, '') AS reviewer,
	COALESCE(r.created, '') AS reviewed,
	(SELECT COUNT(*) FROM label_reviews c WHERE c.label_id = l.id) AS n_reviews
FROM labels l
LEFT JOIN label_reviews r ON r.id = (SELECT MAX(x.id) FROM label_reviews x WHERE x.label_id = l.id);
`, Postgres: `
CREATE TABLE IF NOT EXISTS labels (
	id           BIGSERIAL PRIMARY KEY,
	run_id       TEXT NOT NULL,
	example_key  TEXT NOT NULL,
	example_id   TEXT NOT NULL,
	query_id     TEXT NOT NULL DEFAULT '',
	question     TEXT NOT NULL,
	target       TEXT NOT NULL DEFAULT '',
	snippet      TEXT NOT NULL,
	chunk_id     TEXT NOT NULL DEFAULT '',
	dataset_name TEXT NOT NULL DEFAULT '',
	label        TEXT NOT NULL CHECK (label IN ('[HELPFUL]', '[NOT_HELPFUL]')),
	method       TEXT NOT NULL,
	scorer       TEXT NOT NULL DEFAULT '',
	ppl_without  DOUBLE PRECISION,
	ppl_with     DOUBLE PRECISION,
	score        DOUBLE PRECISION NOT NULL DEFAULT 0,
	created      TEXT NOT NULL,
	UNIQUE (run_id, example_key)
);
CREATE INDEX IF NOT EXISTS labels_key ON labels (example_key);
CREATE TABLE IF NOT EXISTS label_reviews (
	id         BIGSERIAL PRIMARY KEY,
	label_id   BIGINT NOT NULL REFERENCES labels (id),
	label      TEXT NOT NULL CHECK (label IN ('[HELPFUL]', '[NOT_HELPFUL]')),
	provenance TEXT NOT NULL DEFAULT 'human',
	reviewer   TEXT NOT NULL DEFAULT '',
	created    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS label_reviews_label ON label_reviews (label_id);
CREATE TABLE IF NOT EXISTS score_cache (
	scorer     TEXT NOT NULL,
	prompt_sha TEXT NOT NULL,
	target_sha TEXT NOT NULL,
	logprobs   TEXT NOT NULL,
	created    TEXT NOT NULL,
	UNIQUE (scorer, prompt_sha, target_sha)
);
CREATE OR REPLACE VIEW label_effective AS
SELECT l.id, l.run_id, l.example_key, l.example_id, l.query_id, l.question, l.target, l.snippet,
	l.chunk_id, l.dataset_name, l.label, l.method, l.scorer, l.ppl_without, l.ppl_with, l.score, l.created,
	COALESCE(r.label, l.label) AS effective,
	CASE WHEN r.id IS NULL THEN 'machine' ELSE r.provenance END AS provenance,
	COALESCE(r.reviewer, '') AS reviewer,
	COALESCE(r.created, '') AS reviewed,
	(SELECT COUNT(*) FROM label_reviews c WHERE c.label_id = l.id) AS n_reviews
FROM labels l
LEFT JOIN label_reviews r ON r.id = (SELECT MAX(x.id) FROM label_reviews x WHERE x.label_id = l.id);
`},
}

// Store keeps labels, reviews and the score cache in SQLite or PostgreSQL. It is safe for
// concurrent use; writes are serialized. Its methods are grouped by concern:
// this file holds the schema and opening, store_write.go the writes (Put,
// Import, Review, Undo), store_query.go the reads (Get, List, Examples,
// Export, Counts, Diff) and store_cache.go the scorers' log-probability cache.
type Store struct {
	db    *storedb.DB
	owned bool
	mu    sync.Mutex
	now   func() time.Time
}

// OpenStore opens the database at path as data/tracker does (storedb.Open:
// a postgres:// URL, or a literal SQLite file path created when missing,
// WAL, busy timeout 10 s, immediate transactions, PRAGMA quick_check), and
// migrates the label tables. It may be the same database as the
// data/tracker store. A corrupt file is refused with an error wrapping
// sqlitedb.ErrCorrupt.
func OpenStore(path string) (*Store, error) {
	db, err := storedb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open label store: %w", err)
	}
	s, err := NewStore(db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open label store %s: %w", db.Name, err)
	}
	s.owned = true
	return s, nil
}

// NewStore uses an open database (for instance the data/tracker store's)
// and migrates the label tables in it. Close does not close db.
func NewStore(db *storedb.DB) (*Store, error) {
	if _, err := db.Migrate("label_schema_version", migrations); err != nil {
		return nil, fmt.Errorf("label tables: %w", err)
	}
	return &Store{db: db, now: time.Now}, nil
}

// DB returns the underlying database.
func (s *Store) DB() *storedb.DB { return s.db }

// Close closes the database when OpenStore opened it.
func (s *Store) Close() error {
	if s.owned {
		return s.db.Close()
	}
	return nil
}

func (s *Store) stamp() string { return s.now().UTC().Format(time.RFC3339Nano) }

func nullIfZero(v float64) any {
	if v == 0 || math.IsNaN(v) {
		return nil
	}
	return v
}
