package label

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ragforge/ragforge/data/sqlitedb"
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
func (l Label) Example() Example {
	return Example{ID: l.ExampleID, Question: Instruction(l.Snippet, l.Question), Answer: l.Label, DatasetName: l.DatasetName}
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
func (r Record) Example() Example {
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

const schema = `
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
`

// Store keeps labels, reviews and the score cache in SQLite. It is safe for
// concurrent use; writes are serialized.
type Store struct {
	db    *sql.DB
	owned bool
	mu    sync.Mutex
	now   func() time.Time
}

// OpenStore opens (creating when missing) the SQLite database file at path
// as data/runs does (sqlitedb.OpenChecked: a literal file path, WAL, busy
// timeout 10 s, immediate transactions, PRAGMA quick_check), and creates the
// label tables. It may be the same file as the data/runs store. A corrupt
// file is refused with an error wrapping sqlitedb.ErrCorrupt.
func OpenStore(path string) (*Store, error) {
	db, err := sqlitedb.OpenChecked(path)
	if err != nil {
		return nil, fmt.Errorf("open label store: %w", err)
	}
	s, err := NewStore(db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open label store %s: %w", path, err)
	}
	s.owned = true
	return s, nil
}

// NewStore uses an open SQLite database (for instance the data/runs store's)
// and creates the label tables in it. Close does not close db.
func NewStore(db *sql.DB) (*Store, error) {
	if _, err := db.Exec(schema); err != nil {
		return nil, fmt.Errorf("create label tables: %w", err)
	}
	return &Store{db: db, now: time.Now}, nil
}

// DB returns the underlying database.
func (s *Store) DB() *sql.DB { return s.db }

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

// Put stores labels in one transaction, replacing the machine fields of a
// label already stored under the same (RunID, Key) and keeping its id and its
// reviews; it sets each label's ID (and Created when zero). Errors name the
// label's position and field; on error nothing is written.
func (s *Store) Put(labels []Label) error { return s.PutContext(context.Background(), labels) }

// PutContext is Put, stopping at the next label (nothing written, the
// error wrapping ctx.Err()) when ctx is cancelled.
func (s *Store) PutContext(ctx context.Context, labels []Label) error {
	for i, l := range labels {
		if err := checkLabel(l); err != nil {
			return fmt.Errorf("store labels: label %d (key %q): %w", i+1, l.Key, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store labels: %w", err)
	}
	defer tx.Rollback()
	const q = `INSERT INTO labels (run_id, example_key, example_id, query_id, question, target, snippet, chunk_id,
		dataset_name, label, method, scorer, ppl_without, ppl_with, score, created)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id, example_key) DO UPDATE SET example_id = excluded.example_id, query_id = excluded.query_id,
		question = excluded.question, target = excluded.target, snippet = excluded.snippet, chunk_id = excluded.chunk_id,
		dataset_name = excluded.dataset_name, label = excluded.label, method = excluded.method, scorer = excluded.scorer,
		ppl_without = excluded.ppl_without, ppl_with = excluded.ppl_with, score = excluded.score, created = excluded.created
		RETURNING id`
	stmt, err := tx.Prepare(q)
	if err != nil {
		return fmt.Errorf("store labels: %w", err)
	}
	defer stmt.Close()
	ids := make([]int64, len(labels))
	created := make([]time.Time, len(labels))
	for i, l := range labels {
		c := l.Created
		if c.IsZero() {
			c = s.now()
		}
		created[i] = c
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("store labels: stopped at label %d: %w", i+1, err)
		}
		err := stmt.QueryRowContext(ctx, l.RunID, l.Key, l.ExampleID, l.QueryID, l.Question, l.Target, l.Snippet, l.ChunkID,
			l.DatasetName, l.Label, l.Method, l.Scorer, nullIfZero(l.PPLWithout), nullIfZero(l.PPLWith), l.Score,
			c.UTC().Format(time.RFC3339Nano)).Scan(&ids[i])
		if err != nil {
			return fmt.Errorf("store labels: label %d (key %q): %w", i+1, l.Key, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store labels: %w", err)
	}
	for i := range labels {
		labels[i].ID = ids[i]
		labels[i].Created = created[i]
	}
	return nil
}

func checkLabel(l Label) error {
	switch {
	case l.RunID == "":
		return fmt.Errorf("field %q: empty", "run_id")
	case l.Key == "":
		return fmt.Errorf("field %q: empty", "key")
	case l.ExampleID == "":
		return fmt.Errorf("field %q: empty", "id")
	case l.Method == "":
		return fmt.Errorf("field %q: empty", "method")
	case !ValidLabel(l.Label):
		return fmt.Errorf("field %q: label %q is neither %s nor %s", "label", l.Label, Helpful, NotHelpful)
	}
	return nil
}

// Import reads a RAG² JSON/JSONL file (ReadExamples, strict) and stores its
// examples as labels of runID with method "import"; the evidence and question
// come from each example's instruction. A file that fails validation stores
// nothing, and labels already stored are untouched. It returns the stored labels.
func (s *Store) Import(runID, path string) ([]Label, error) {
	return s.ImportContext(context.Background(), runID, path)
}

// ImportContext is Import, storing nothing when ctx is cancelled before the
// labels are committed (the error wraps ctx.Err()).
func (s *Store) ImportContext(ctx context.Context, runID, path string) ([]Label, error) {
	exs, err := ReadExamples(path)
	if err != nil {
		return nil, err
	}
	labels := make([]Label, len(exs))
	for i, ex := range exs {
		ev, q, _ := ParseInstruction(ex.Question) // validated by ReadExamples
		labels[i] = Label{RunID: runID, Key: Key(q, "", ev), ExampleID: ex.ID, Question: q, Snippet: ev,
			DatasetName: ex.DatasetName, Label: ex.Answer, Method: MethodImport, Scorer: path}
	}
	if err := s.PutContext(ctx, labels); err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	return labels, nil
}

const recordCols = `id, run_id, example_key, example_id, query_id, question, target, snippet, chunk_id, dataset_name,
	label, method, scorer, COALESCE(ppl_without, 0), COALESCE(ppl_with, 0), score, created,
	effective, provenance, reviewer, reviewed, n_reviews`

func scanRecord(sc interface{ Scan(...any) error }) (Record, error) {
	var r Record
	var created, reviewed string
	err := sc.Scan(&r.ID, &r.RunID, &r.Key, &r.ExampleID, &r.QueryID, &r.Question, &r.Target, &r.Snippet, &r.ChunkID,
		&r.DatasetName, &r.Label.Label, &r.Method, &r.Scorer, &r.PPLWithout, &r.PPLWith, &r.Score, &created,
		&r.Effective, &r.Provenance, &r.Reviewer, &reviewed, &r.Reviews)
	if err != nil {
		return r, err
	}
	r.Created, _ = time.Parse(time.RFC3339Nano, created)
	if reviewed != "" {
		r.Reviewed, _ = time.Parse(time.RFC3339Nano, reviewed)
	}
	return r, nil
}

func (s *Store) query(q string, args ...any) ([]Record, error) {
	rows, err := s.db.Query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ErrNotFound reports an unknown label id.
var ErrNotFound = errors.New("label not found")

// Get returns the label with id and its review state. Errors: ErrNotFound.
func (s *Store) Get(id int64) (Record, error) {
	r, err := scanRecord(s.db.QueryRow(`SELECT `+recordCols+` FROM label_effective WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("label %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("label %d: %w", id, err)
	}
	return r, nil
}

// Filter selects labels for List. Zero fields select everything.
type Filter struct {
	RunID  string
	Class  string // effective label, Helpful or NotHelpful
	Method string
	// Disagreement keeps labels whose (question, snippet) Key also has a label of
	// the other automatic method (perplexity vs evidence) with a different
	// effective label, in any run.
	Disagreement bool
	// LowConfidence > 0 keeps perplexity labels with |ppl_with - ppl_without| <
	// LowConfidence (perplexity units), smallest difference first.
	LowConfidence float64
	Reviewed      *bool // when set, keep only reviewed (true) or unreviewed (false) labels
	Limit         int   // 0 = no limit
}

// List returns the labels matching f, in id order (or by confidence, see
// Filter.LowConfidence).
func (s *Store) List(f Filter) ([]Record, error) {
	if f.Class != "" && !ValidLabel(f.Class) {
		return nil, fmt.Errorf("list labels: class %q is neither %s nor %s", f.Class, Helpful, NotHelpful)
	}
	var where []string
	var args []any
	if f.RunID != "" {
		where, args = append(where, "e.run_id = ?"), append(args, f.RunID)
	}
	if f.Class != "" {
		where, args = append(where, "e.effective = ?"), append(args, f.Class)
	}
	if f.Method != "" {
		where, args = append(where, "e.method = ?"), append(args, f.Method)
	}
	if f.Disagreement {
		where = append(where, `e.method IN ('perplexity', 'evidence') AND EXISTS (SELECT 1 FROM label_effective o
			WHERE o.example_key = e.example_key AND o.method IN ('perplexity', 'evidence')
			AND o.method <> e.method AND o.effective <> e.effective)`)
	}
	order := "e.id"
	if f.LowConfidence > 0 {
		where = append(where, "e.method = 'perplexity' AND ABS(e.ppl_with - e.ppl_without) < ?")
		args = append(args, f.LowConfidence)
		order = "ABS(e.ppl_with - e.ppl_without), e.id"
	}
	if f.Reviewed != nil {
		if *f.Reviewed {
			where = append(where, "e.n_reviews > 0")
		} else {
			where = append(where, "e.n_reviews = 0")
		}
	}
	q := `SELECT ` + recordCols + ` FROM label_effective e`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY " + order
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	out, err := s.query(q, args...)
	if err != nil {
		return nil, fmt.Errorf("list labels: %w", err)
	}
	return out, nil
}

// Review records a person's decision on label id and returns the updated
// record. action is Helpful or NotHelpful (set that class), ReviewConfirm
// (keep the effective label) or ReviewFlip (switch it). The machine label is
// never changed: the review is a new row of label_reviews with provenance
// "human". Errors: ErrNotFound, an unknown action.
func (s *Store) Review(id int64, action, reviewer string) (Record, error) {
	r, err := s.Get(id)
	if err != nil {
		return r, fmt.Errorf("review: %w", err)
	}
	var lab string
	switch action {
	case Helpful, NotHelpful:
		lab = action
	case ReviewConfirm:
		lab = r.Effective
	case ReviewFlip:
		lab = Helpful
		if r.Effective == Helpful {
			lab = NotHelpful
		}
	default:
		return r, fmt.Errorf("review label %d: action %q is not %s, %s, %q or %q", id, action, Helpful, NotHelpful, ReviewConfirm, ReviewFlip)
	}
	s.mu.Lock()
	_, err = s.db.Exec(`INSERT INTO label_reviews (label_id, label, provenance, reviewer, created) VALUES (?, ?, ?, ?, ?)`,
		id, lab, ProvenanceHuman, reviewer, s.stamp())
	s.mu.Unlock()
	if err != nil {
		return r, fmt.Errorf("review label %d: %w", id, err)
	}
	return s.Get(id)
}

// Undo deletes the latest review of label id and returns the updated record
// (effective label back to the previous review's, or the machine label).
// Errors: ErrNotFound, or a label without reviews.
func (s *Store) Undo(id int64) (Record, error) {
	if _, err := s.Get(id); err != nil {
		return Record{}, fmt.Errorf("undo: %w", err)
	}
	s.mu.Lock()
	res, err := s.db.Exec(`DELETE FROM label_reviews WHERE id = (SELECT MAX(id) FROM label_reviews WHERE label_id = ?)`, id)
	s.mu.Unlock()
	if err != nil {
		return Record{}, fmt.Errorf("undo review of label %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Record{}, fmt.Errorf("undo review of label %d: the label has no review", id)
	}
	return s.Get(id)
}

// Examples returns the RAG² examples of runID with their effective labels,
// ordered by query id then example id (not storage order), so the export of
// identical runs is identical.
func (s *Store) Examples(runID string) ([]Example, error) {
	recs, err := s.List(Filter{RunID: runID})
	if err != nil {
		return nil, err
	}
	// Concurrent labelers store in completion order; sort by question and
	// example id so identical runs export identical files.
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].QueryID != recs[j].QueryID {
			return recs[i].QueryID < recs[j].QueryID
		}
		return recs[i].ExampleID < recs[j].ExampleID
	})
	out := make([]Example, len(recs))
	for i, r := range recs {
		out[i] = r.Example()
	}
	return out, nil
}

// Export writes the examples of runID (effective labels) to path in format
// (see FormatOf; "" picks by extension) and returns how many it wrote. Errors:
// a run without labels, or a write error (an existing file is then kept).
func (s *Store) Export(runID, path string, format Format) (int, error) {
	f, err := FormatOf(string(format), path)
	if err != nil {
		return 0, fmt.Errorf("export run %q: %w", runID, err)
	}
	exs, err := s.Examples(runID)
	if err != nil {
		return 0, fmt.Errorf("export run %q: %w", runID, err)
	}
	if len(exs) == 0 {
		return 0, fmt.Errorf("export run %q: no labels stored for this run", runID)
	}
	if err := WriteExamples(path, f, exs); err != nil {
		return 0, fmt.Errorf("export run %q: %w", runID, err)
	}
	return len(exs), nil
}

// Counts returns the number of labels of runID per effective class; both
// class tokens are always present.
func (s *Store) Counts(runID string) (map[string]int, error) {
	rows, err := s.db.Query(`SELECT effective, COUNT(*) FROM label_effective WHERE run_id = ? GROUP BY effective`, runID)
	if err != nil {
		return nil, fmt.Errorf("count labels of run %q: %w", runID, err)
	}
	defer rows.Close()
	out := map[string]int{Helpful: 0, NotHelpful: 0}
	for rows.Next() {
		var c string
		var n int
		if err := rows.Scan(&c, &n); err != nil {
			return nil, fmt.Errorf("count labels of run %q: %w", runID, err)
		}
		out[c] = n
	}
	return out, rows.Err()
}

// Change is a Key labeled differently by two runs.
type Change struct {
	Key  string `json:"key"`
	A, B Record
}

// RunDiff compares two runs by Key on effective labels.
type RunDiff struct {
	Changed []Change `json:"changed"`
	OnlyA   []Record `json:"only_a"`
	OnlyB   []Record `json:"only_b"`
	Same    int      `json:"same"`
}

// Diff compares runA with runB: keys in both with different effective labels
// (Changed, in runA id order), keys in only one run, and the count of keys
// with the same label.
func (s *Store) Diff(runA, runB string) (*RunDiff, error) {
	a, err := s.List(Filter{RunID: runA})
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	b, err := s.List(Filter{RunID: runB})
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	inB := make(map[string]Record, len(b))
	for _, r := range b {
		inB[r.Key] = r
	}
	d := &RunDiff{}
	inA := make(map[string]bool, len(a))
	for _, ra := range a {
		inA[ra.Key] = true
		rb, ok := inB[ra.Key]
		switch {
		case !ok:
			d.OnlyA = append(d.OnlyA, ra)
		case ra.Effective != rb.Effective:
			d.Changed = append(d.Changed, Change{Key: ra.Key, A: ra, B: rb})
		default:
			d.Same++
		}
	}
	for _, rb := range b {
		if !inA[rb.Key] {
			d.OnlyB = append(d.OnlyB, rb)
		}
	}
	return d, nil
}

// CachedLogProbs returns the cached log-probabilities of (scorer, prompt,
// target), keyed by the SHA-256 of prompt and target.
func (s *Store) CachedLogProbs(ctx context.Context, scorer, prompt, target string) ([]float64, bool, error) {
	var js string
	err := s.db.QueryRowContext(ctx, `SELECT logprobs FROM score_cache WHERE scorer = ? AND prompt_sha = ? AND target_sha = ?`,
		scorer, fullHash(prompt), fullHash(target)).Scan(&js)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("score cache: %w", err)
	}
	var lp []float64
	if err := json.Unmarshal([]byte(js), &lp); err != nil {
		return nil, false, fmt.Errorf("score cache: scorer %q: field %q: %w", scorer, "logprobs", err)
	}
	return lp, true, nil
}

// PutLogProbs caches the log-probabilities of (scorer, prompt, target),
// replacing an earlier entry.
func (s *Store) PutLogProbs(ctx context.Context, scorer, prompt, target string, logprobs []float64) error {
	js, err := json.Marshal(logprobs)
	if err != nil {
		return fmt.Errorf("score cache: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err = s.db.ExecContext(ctx, `INSERT OR REPLACE INTO score_cache (scorer, prompt_sha, target_sha, logprobs, created) VALUES (?, ?, ?, ?, ?)`,
		scorer, fullHash(prompt), fullHash(target), string(js), s.stamp())
	if err != nil {
		return fmt.Errorf("score cache: %w", err)
	}
	return nil
}

// Cached wraps a Scorer with the Store's score cache: a (Name, prompt, target)
// already scored is answered from SQLite, anything else is scored and stored
// before it is returned. Concurrent calls for the same triple share one
// scorer call.
func (s *Store) Cached(sc Scorer) Scorer {
	return &cachedScorer{inner: sc, store: s, flight: map[[2]string]*flight{}}
}

type flight struct {
	done chan struct{}
	lp   []float64
	err  error
}

type cachedScorer struct {
	inner  Scorer
	store  *Store // nil: memory only (see memoize)
	mu     sync.Mutex
	flight map[[2]string]*flight
	memo   map[[2]string][]float64
}

// memoize wraps sc with an in-memory cache (no Store): each distinct
// (prompt, target) is scored once per labeling run.
func memoize(sc Scorer) Scorer {
	return &cachedScorer{inner: sc, flight: map[[2]string]*flight{}, memo: map[[2]string][]float64{}}
}

func (c *cachedScorer) Name() string { return c.inner.Name() }

func (c *cachedScorer) TargetLogProbs(ctx context.Context, prompt, target string) ([]float64, error) {
	key := [2]string{fullHash(prompt), fullHash(target)}
	c.mu.Lock()
	if lp, ok := c.memo[key]; ok {
		c.mu.Unlock()
		return lp, nil
	}
	if f, ok := c.flight[key]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.lp, f.err
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	f := &flight{done: make(chan struct{})}
	c.flight[key] = f
	c.mu.Unlock()
	f.lp, f.err = c.score(ctx, prompt, target)
	close(f.done)
	c.mu.Lock()
	delete(c.flight, key)
	if f.err == nil && c.memo != nil {
		c.memo[key] = f.lp
	}
	c.mu.Unlock()
	return f.lp, f.err
}

func (c *cachedScorer) score(ctx context.Context, prompt, target string) ([]float64, error) {
	if c.store == nil {
		return c.inner.TargetLogProbs(ctx, prompt, target)
	}
	name := c.inner.Name()
	if lp, ok, err := c.store.CachedLogProbs(ctx, name, prompt, target); err != nil || ok {
		return lp, err
	}
	lp, err := c.inner.TargetLogProbs(ctx, prompt, target)
	if err != nil {
		return nil, err
	}
	// Store with a fresh context: a finished score must survive a cancellation
	// that arrives right after it.
	if err := c.store.PutLogProbs(context.WithoutCancel(ctx), name, prompt, target, lp); err != nil {
		return nil, err
	}
	return lp, nil
}
