package evalrun

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/internal/version"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/retrieval/eval"
	"github.com/ragforge/ragforge/retrieval/search"
)

// Kind is the run kind an evaluation is recorded as.
const Kind = "eval-retrieval"

// Config is one retrieval evaluation. Its JSON is the run config stored
// with the run.
type Config struct {
	Corpus    Corpus    `json:"corpus"`
	Retriever Retriever `json:"retriever"`
	// QA is an AP QA CSV (Question,Ground_Truth,Context) or a BEIR
	// directory (queries.jsonl, qrels/<Split>.tsv).
	QA    string `json:"qa"`
	Split string `json:"split,omitempty"`
	// Ks are the cutoffs, "1,2,4,8" (10 is always added).
	Ks string `json:"k"`
	// Relevance is the rule judging a QA CSV: eval.RelevanceContains or
	// eval.RelevanceSpan.
	Relevance string `json:"relevance"`
	Limit     int    `json:"limit"` // 0: all questions
	Depth     int    `json:"depth"` // hits retrieved per question
	// Out is the directory of per_query.jsonl, run.trec and qrels.tsv;
	// "": runs/<run id> beside the store (Run), required without a run.
	Out string `json:"out,omitempty"`
	// Pseudo ("ict") evaluates on pseudo-queries drawn from the corpus
	// instead of QA (label.ICTQueries: one sentence per chunk, removed
	// from the index text unless kept, a PseudoKeep fraction).
	Pseudo     string  `json:"pseudo_queries,omitempty"`
	PseudoKeep float64 `json:"pseudo_keep,omitempty"`
	Seed       uint64  `json:"seed,omitempty"`

	// PseudoQueries draws the pseudo-queries of Pseudo (the label floor,
	// above this one, has them: wrap label.ICTQueries); needed with Pseudo.
	PseudoQueries PseudoFunc `json:"-"`
	// Backend is the GoMLX backend of the encoder ("": the default).
	Backend string `json:"-"`
	// Log gets progress bars, notes and judgment warnings (nil: nowhere).
	Log io.Writer `json:"-"`
}

// PseudoFunc draws pseudo-queries from chunks: the queries, their
// chunk-level judgments, and the chunks to index in place of the corpus's.
type PseudoFunc func(ctx context.Context, chunks []data.Chunk, keep float64, seed uint64) ([]data.Query, data.Qrels, []data.Chunk, error)

// DefaultConfig is the CLI's defaults: corpus chunked 512/128, BM25, k
// 1,2,4,8, the contains rule, depth 1000 (BEIR's top 1000), BEIR split test.
func DefaultConfig(corpus, qa string) Config {
	return Config{Corpus: DefaultCorpus(corpus), Retriever: DefaultRetriever(), QA: qa, Split: "test", Ks: "1,2,4,8",
		Relevance: eval.RelevanceContains, Depth: 1000, Seed: 42}
}

// Check validates the settings before any work and returns the cutoffs;
// for the dense modes it resolves the encoder's settings.
func (c *Config) Check() ([]int, error) {
	switch {
	case c.Pseudo != "" && c.Pseudo != "ict":
		return nil, fmt.Errorf("--pseudo-queries %q: want ict", c.Pseudo)
	case c.Pseudo != "" && c.QA != "":
		return nil, fmt.Errorf("--pseudo-queries and --qa exclude each other (pseudo-queries are the questions)")
	case c.Pseudo == "" && c.QA == "":
		return nil, fmt.Errorf("--qa is required (or --pseudo-queries ict)")
	case c.PseudoKeep < 0 || c.PseudoKeep > 1:
		return nil, fmt.Errorf("--pseudo-keep %v: want a fraction in [0, 1]", c.PseudoKeep)
	case c.Pseudo != "" && c.PseudoQueries == nil:
		return nil, fmt.Errorf("--pseudo-queries %s: no pseudo-query source (Config.PseudoQueries)", c.Pseudo)
	}
	ks, err := ParseInts(c.Ks, "k")
	if err != nil {
		return nil, err
	}
	if _, err := c.Retriever.BM25.Config(); err != nil {
		return nil, fmt.Errorf("--bm25-k1/--bm25-b/--analyzer: %w", err)
	}
	if c.Retriever.Union && c.Retriever.Mode != search.Hybrid {
		return nil, fmt.Errorf("--union applies to --retriever hybrid only, not %s", c.Retriever.Mode)
	}
	if c.Relevance != eval.RelevanceContains && c.Relevance != eval.RelevanceSpan {
		return nil, fmt.Errorf("--relevance %q: want contains or span", c.Relevance)
	}
	if maxK := slices.Max(ks); c.Depth < maxK {
		return nil, fmt.Errorf("--depth %d: below the largest --k %d", c.Depth, maxK)
	}
	return ks, c.Retriever.Check()
}

// ParseInts parses a list of positive integers, "1,2,4,8"; flag names the
// setting in errors.
func ParseInts(s, flag string) ([]int, error) {
	var out []int
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("--%s %q: entry %d is empty", flag, s, i+1)
		}
		v, err := strconv.Atoi(part)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("--%s: %q is not a positive integer", flag, part)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--%s: empty", flag)
	}
	return out, nil
}

// Result is an evaluation's summary (what `eval retrieval --json` prints).
type Result struct {
	RunID     string `json:"run_id"`
	Retriever string `json:"retriever"`
	Chunks    int    `json:"chunks"`
	// Queries counts every question; Unjudged those without a relevant
	// chunk (scored 0 in Metrics); Judged the rest (MetricsJudged, what
	// trec_eval -c prints on qrels.tsv and run.trec).
	Queries   int    `json:"queries"`
	Judged    int    `json:"judged"`
	Unjudged  int    `json:"unjudged"`
	Relevance string `json:"relevance"`
	Ks        []int  `json:"ks"`
	Depth     int    `json:"depth"`
	// Shortfall counts the questions that got fewer hits than the largest
	// k (capped at the corpus size): an IVF index with a small nprobe,
	// an HNSW index with a small efSearch, a BM25 query matching little.
	Shortfall     int                `json:"shortfall"`
	Qrels         eval.QrelsCheck    `json:"qrels"`
	Metrics       map[string]float64 `json:"metrics"`
	MetricsJudged map[string]float64 `json:"metrics_judged"`
	Files         map[string]string  `json:"files"`
	Seconds       float64            `json:"seconds"`
	// Hybrid only: the RRF weights used and, when they came from the
	// encoder's ragforge_fusion.json, that file.
	DenseWeight float64 `json:"dense_weight,omitempty"`
	BM25Weight  float64 `json:"bm25_weight,omitempty"`
	WeightsFrom string  `json:"weights_from,omitempty"`

	// Report is the full report (per-query metrics, the table).
	Report *eval.Report `json:"-"`
}

// Run starts a Kind run in st with cfg as its config, evaluates (files in
// cfg.Out, default tracker.RunDir beside the store) and finishes the run.
func Run(ctx context.Context, st *tracker.Store, cfg Config) (res *Result, err error) {
	if _, err := cfg.Check(); err != nil {
		return nil, err
	}
	err = st.Record(version.Version, backend.Name(cfg.Backend), func(start tracker.Starter) error {
		run, err := start(Kind, cfg)
		if err != nil {
			return err
		}
		if cfg.Out == "" {
			cfg.Out = tracker.RunDir(st.Path(), run.ID)
		}
		res, err = Evaluate(ctx, cfg, run)
		return err
	})
	return res, err
}

// Evaluate loads and chunks the corpus, judges the questions, builds the
// retriever, searches every question to cfg.Depth and scores the run;
// writes per_query.jsonl, run.trec and qrels.tsv into cfg.Out. run, when
// set, gets the metrics and the files as artifacts.
func Evaluate(ctx context.Context, cfg Config, run *tracker.Run) (res *Result, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	start := time.Now()
	ks, err := cfg.Check()
	if err != nil {
		return nil, err
	}
	if cfg.Out == "" {
		return nil, fmt.Errorf("evaluate retrieval: no output directory (Config.Out)")
	}
	ld, err := cfg.Corpus.Load(cfg.Log)
	if err != nil {
		return nil, err
	}
	if ld.Encoded != nil && cfg.Relevance == eval.RelevanceSpan {
		return nil, fmt.Errorf("--relevance span needs the source documents; a pre-encoded corpus (%s) holds only chunks (use contains)", cfg.Corpus.Path)
	}
	if ld.Encoded != nil && cfg.Pseudo != "" {
		return nil, fmt.Errorf("--pseudo-queries changes the chunks' text; a pre-encoded corpus (%s) is indexed as encoded", cfg.Corpus.Path)
	}
	set, err := cfg.querySet(ctx, ld.Docs, ld.Chunks)
	if err != nil {
		return nil, err
	}
	chunks := ld.Chunks
	if set.index != nil {
		chunks = set.index
	}
	// Issue 30: --union at --depth 1000 over 956 chunks wrote a run.trec
	// byte-identical to the plain hybrid's; refuse what cannot have an effect.
	if cfg.Retriever.Union && cfg.Depth >= len(chunks) {
		return nil, fmt.Errorf("--union has no effect at --depth %d: the corpus has %d chunks, so each top-%d list already holds every chunk and the run equals the plain hybrid's; lower --depth below %d or drop --union", cfg.Depth, len(chunks), cfg.Depth, len(chunks))
	}
	rep, runHits, err := cfg.search(ctx, chunks, ld.Encoded, set, ks)
	if err != nil {
		return nil, err
	}
	return cfg.record(run, rep, runHits, set, len(chunks), start)
}

// search builds the retriever, runs the questions and scores the run.
func (c *Config) search(ctx context.Context, chunks []data.Chunk, pre *data.Encoded, set *querySet, ks []int) (*eval.Report, eval.Run, error) {
	r, closeR, err := c.Retriever.Build(chunks, pre, c.Backend, c.Log)
	if err != nil {
		return nil, nil, err
	}
	defer closeR()
	bar := progress.New(c.Log, len(set.queries), "search")
	runHits, err := eval.RunQueries(ctx, r, set.queries, c.Depth, bar.Func())
	bar.Finish()
	if err != nil {
		return nil, nil, err
	}
	// Shortfall against the largest k, on the retriever's own hits (before
	// any chunk → document mapping).
	fill := eval.NewFill(runHits, slices.Max(ks), len(chunks))
	if set.relevance == eval.RelevanceQrels && c.Corpus.ChunkSize > 0 {
		runHits = eval.DocRun(runHits, chunks)
	}
	rep, err := eval.EvaluateOptions(runHits, set.qrels, ks, eval.Options{Queries: set.ids})
	if err != nil {
		return nil, nil, err
	}
	rep.Fill = fill
	return rep, runHits, nil
}

// record writes the files, logs the metrics and makes the result.
func (c *Config) record(run *tracker.Run, rep *eval.Report, runHits eval.Run, set *querySet, chunks int, start time.Time) (*Result, error) {
	judged := make(data.Qrels, len(set.ids))
	for _, q := range set.ids {
		if j, ok := set.qrels[q]; ok {
			judged[q] = j
		}
	}
	files, err := writeFiles(run, c.Out, rep, runHits, judged, string(c.Retriever.Mode))
	if err != nil {
		return nil, err
	}
	if err := logMetrics(run, rep.Mean); err != nil {
		return nil, err
	}
	res := &Result{
		Retriever: string(c.Retriever.Mode), Chunks: chunks, Queries: len(rep.Queries), Judged: len(rep.Judged), Unjudged: len(rep.Unjudged),
		Relevance: set.relevance, Ks: rep.Ks, Depth: c.Depth, Shortfall: len(rep.Fill.Short()), Qrels: set.check,
		Metrics: rep.Mean, MetricsJudged: rep.MeanJudged, Files: files, Seconds: time.Since(start).Seconds(), Report: rep,
	}
	if run != nil {
		res.RunID = run.ID
	}
	if c.Retriever.Mode == search.Hybrid {
		r := c.Retriever
		res.DenseWeight, res.BM25Weight, res.WeightsFrom = r.DenseWeight, r.BM25Weight, r.WeightsFrom
		if err := logMetrics(run, map[string]float64{"hybrid/dense_weight": res.DenseWeight, "hybrid/bm25_weight": res.BM25Weight}); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func logMetrics(run *tracker.Run, m map[string]float64) error {
	if run == nil {
		return nil
	}
	return run.LogMetrics(m, 0)
}

// querySet is the questions of an evaluation and their judgments.
type querySet struct {
	queries   []data.Query // the evaluated ones (Limit)
	ids       []string     // their ids
	qrels     data.Qrels
	relevance string // "qrels" (BEIR), the QA-CSV rule, or "ict" (Pseudo)
	check     eval.QrelsCheck
	index     []data.Chunk // Pseudo: the chunks to index in place of the corpus's
}

// querySet loads QA (or draws the pseudo-queries), judges a QA CSV by the
// Relevance rule, and warns about judgments naming ids the evaluation does
// not know (BEIR qrels name documents, the QA-CSV rule chunks).
func (c *Config) querySet(ctx context.Context, docs []data.Document, chunks []data.Chunk) (*querySet, error) {
	var queries []data.Query
	var qrels data.Qrels
	var index []data.Chunk
	var err error
	if c.Pseudo != "" {
		queries, qrels, index, err = c.PseudoQueries(ctx, chunks, c.PseudoKeep, c.Seed)
	} else {
		queries, qrels, err = data.OpenQueries(c.QA, c.Split)
	}
	if err != nil {
		return nil, err
	}
	allQueryIDs := make([]string, len(queries))
	for i, q := range queries {
		allQueryIDs[i] = q.ID
	}
	if c.Limit > 0 && c.Limit < len(queries) {
		queries = queries[:c.Limit]
	}
	set := &querySet{queries: queries, ids: allQueryIDs[:len(queries)], qrels: qrels, relevance: eval.RelevanceQrels, index: index}
	if index != nil {
		// Pseudo-query judgments are chunk-level, of the chunks indexed in place of the corpus.
		set.relevance = c.Pseudo
		set.check = eval.CheckQrels(qrels, allQueryIDs, eval.JudgedIDs(false, docs, chunks))
	} else {
		j, err := eval.Judge(queries, allQueryIDs, qrels, docs, chunks, c.Relevance)
		if err != nil {
			return nil, err
		}
		set.qrels, set.relevance, set.check = j.Qrels, j.Relevance, j.Check
	}
	WarnQrels(orDiscard(c.Log), set.check)
	return set, nil
}

// WarnQrels tells w about judgments naming unknown queries or documents
// (trec_eval and pytrec_eval ignore them silently).
func WarnQrels(w io.Writer, c eval.QrelsCheck) {
	first := func(ids []string) string {
		if len(ids) > 3 {
			return strings.Join(ids[:3], ", ") + ", ..."
		}
		return strings.Join(ids, ", ")
	}
	if n := len(c.UnknownQueries); n > 0 {
		fmt.Fprintf(w, "warning: qrels: %d judged queries are not in the query set and are not evaluated (%s)\n", n, first(c.UnknownQueries))
	}
	if c.UnknownDocs > 0 {
		fmt.Fprintf(w, "warning: qrels: %d judgments name %d ids absent from the corpus; they still count as relevant (%s)\n",
			c.UnknownDocs, len(c.UnknownDocIDs), first(c.UnknownDocIDs))
	}
}

// writeFiles writes per_query.jsonl, run.trec (tagged ragforge-<tag>) and
// qrels.tsv into dir, each recorded as an artifact of run when set.
func writeFiles(run *tracker.Run, dir string, rep *eval.Report, hits eval.Run, qrels data.Qrels, tag string) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	files := map[string]string{"per_query": filepath.Join(dir, "per_query.jsonl"), "trec": filepath.Join(dir, "run.trec"),
		"qrels": filepath.Join(dir, "qrels.tsv")}
	write := func(path string, fn func(f *os.File) error) error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return err
		}
		if run == nil {
			return nil
		}
		return run.Artifact(filepath.Base(path), path)
	}
	if err := write(files["per_query"], func(f *os.File) error { return rep.WritePerQueryJSONL(f) }); err != nil {
		return nil, err
	}
	if err := write(files["trec"], func(f *os.File) error { return eval.WriteTREC(f, hits, "ragforge-"+tag) }); err != nil {
		return nil, err
	}
	if err := write(files["qrels"], func(f *os.File) error { return eval.WriteQrels(f, qrels) }); err != nil {
		return nil, err
	}
	return files, nil
}
