package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/retrieval/eval"
	"github.com/ragforge/ragforge/retrieval/search"
)

type evalRetrievalOptions struct {
	Corpus    corpusFlags    `json:"corpus"`
	Retriever retrieverFlags `json:"retriever"`
	QA        string         `json:"qa"`
	Split     string         `json:"split,omitempty"`
	Ks        string         `json:"k"`
	Relevance string         `json:"relevance"`
	Limit     int            `json:"limit"` // 0: all
	Depth     int            `json:"depth"`
	Out       string         `json:"out,omitempty"`
	// Pseudo ("ict") evaluates on pseudo-queries drawn from the corpus
	// instead of --qa (label.ICTQueries: one sentence per chunk, removed
	// from the index text unless kept, a PseudoKeep fraction).
	Pseudo     string  `json:"pseudo_queries,omitempty"`
	PseudoKeep float64 `json:"pseudo_keep,omitempty"`
	Seed       uint64  `json:"seed,omitempty"`
}

// evalRetrievalResult is what --json prints.
type evalRetrievalResult struct {
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
	// k (capped at the corpus size): an IVF index with a small --nprobe,
	// an HNSW index with a small --ef-search, a BM25 query matching little.
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
}

func newEvalRetrievalCmd(g *globals) *cobra.Command {
	var o evalRetrievalOptions
	cmd := &cobra.Command{
		Use:   "retrieval",
		Short: "Chunk a corpus, index it, run a query set and report P/Recall/Success/F1/nDCG/MRR@k, MAP, R-Prec, Recall@100/1000",
		Long: `Chunk a corpus, index it with the chosen retriever, search every question and
evaluate. Relevance comes from BEIR qrels (--qa DIR) or, for an AP-style QA CSV
(Question,Ground_Truth,Context), from a rule: "contains" (the AP paper: the
normalized reference context is a substring of the chunk or shares >= 5
consecutive tokens with it) or "span" (the context located in its source
document; every chunk overlapping it counts). --pseudo-queries ict needs no
questions: one sentence of each chunk is the query, removed from every chunk
holding it, and those chunks are its relevant ones (the inverse cloze task),
to choose settings such as the BM25 analyzer without relevance labels.

Success@k is the hit rate (1 when any relevant chunk is in the top k), the
figure the AP paper's table calls recall; Recall@k is the fraction of the
relevant chunks found. Every figure divides by all the questions: a question
without any relevant chunk (or with judgments {}) is a miss scoring 0, and
their count is printed beside the figures. When there are such questions the
same table over the judged ones follows: that one is what trec_eval -c gives
on the qrels.tsv and run.trec written here (a query absent from qrels does
not exist for trec_eval); figure over all = figure over the judged × judged
/ all. The summary
says how many questions got fewer than k hits (raise --nprobe for IVF
indexes, --ef-search for HNSW).

Writes the per-query metrics (JSONL, with each question's hit count and
shortfall), a TREC run file and the judgments as TREC qrels into --out
(default runs/<run id> beside the database), so that
"trec_eval -c -m all_trec qrels.tsv run.trec" re-scores the run, and stores
the run and its metrics.`,
		Example: `  ragforge eval retrieval --corpus ../shared/data/ap_protocols --qa ../shared/data/ap_protocols_qa/dev.csv \
    --chunk-size 512 --chunk-overlap 128 --retriever bm25 --k 1,2,4,8 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := runEvalRetrieval(cmd.Context(), g, o)
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.Out, res)
			}
			return nil
		},
	}
	o.Corpus.add(cmd)
	o.Retriever.add(cmd)
	f := cmd.Flags()
	f.StringVar(&o.QA, "qa", "", "questions: AP QA CSV (Question,Ground_Truth,Context) or BEIR dir (queries.jsonl, qrels/<split>.tsv) (required)")
	f.StringVar(&o.Split, "split", "test", "BEIR qrels split")
	f.StringVar(&o.Ks, "k", "1,2,4,8", "cutoffs for P/Recall/Success/F1/nDCG/MRR (10 is always added; MAP, R-Prec, Recall@100 and Recall@1000 are always reported)")
	f.StringVar(&o.Relevance, "relevance", "contains", "relevance rule for a QA CSV: contains | span")
	f.IntVar(&o.Limit, "limit", 0, "evaluate only the first N questions (0 = all)")
	f.IntVar(&o.Depth, "depth", 1000, "hits retrieved per question (MAP, Recall@1000 and the TREC run see this many; BEIR's top 1000)")
	minInt(f, 0, "limit")
	f.StringVar(&o.Pseudo, "pseudo-queries", "", "instead of --qa, pseudo-queries from the corpus alone: ict (one sentence of each chunk, removed from the index text; its relevant chunks are those that held it), to choose settings without relevance labels")
	f.Float64Var(&o.PseudoKeep, "pseudo-keep", 0, "--pseudo-queries ict: fraction of sentences left in the index text, in [0, 1]")
	f.Uint64Var(&o.Seed, "seed", 42, "--pseudo-queries: sampling seed")
	f.StringVar(&o.Out, "out", "", "directory for per-query JSONL and the TREC run (default runs/<run id>)")
	return cmd
}

func runEvalRetrieval(ctx context.Context, g *globals, o evalRetrievalOptions) (res *evalRetrievalResult, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	start := time.Now()
	ks, err := o.validate()
	if err != nil {
		return nil, err
	}
	st, run, err := startRun(g, "eval-retrieval", o)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	defer finishRun(run, &err)
	docs, chunks, err := o.Corpus.load(g)
	if err != nil {
		return nil, err
	}
	if o.Corpus.encoded != nil && o.Relevance == "span" {
		return nil, fmt.Errorf("--relevance span needs the source documents; a pre-encoded corpus (%s) holds only chunks (use contains)", o.Corpus.Path)
	}
	if o.Corpus.encoded != nil && o.Pseudo != "" {
		return nil, fmt.Errorf("--pseudo-queries changes the chunks' text; a pre-encoded corpus (%s) is indexed as encoded", o.Corpus.Path)
	}
	o.Retriever.pre = o.Corpus.encoded
	set, err := o.querySet(ctx, g, docs, chunks)
	if err != nil {
		return nil, err
	}
	if set.index != nil {
		chunks = set.index
	}
	// Issue 30: --union at --depth 1000 over 956 chunks wrote a run.trec
	// byte-identical to the plain hybrid's; refuse what cannot have an effect.
	if o.Retriever.Union && o.Depth >= len(chunks) {
		return nil, fmt.Errorf("--union has no effect at --depth %d: the corpus has %d chunks, so each top-%d list already holds every chunk and the run equals the plain hybrid's; lower --depth below %d or drop --union", o.Depth, len(chunks), o.Depth, len(chunks))
	}
	r, closeR, err := o.Retriever.build(g, chunks)
	if err != nil {
		return nil, err
	}
	defer closeR()
	bar := progress.New(g.Err, len(set.queries), "search")
	runHits, err := eval.RunQueries(ctx, r, set.queries, o.Depth, bar.Func())
	bar.Finish()
	if err != nil {
		return nil, err
	}
	// Shortfall against the largest k, on the retriever's own hits (before
	// any chunk → document mapping).
	fill := eval.NewFill(runHits, slices.Max(ks), len(chunks))
	if set.relevance == "qrels" && o.Corpus.ChunkSize > 0 {
		runHits = eval.DocRun(runHits, chunks)
	}
	rep, err := eval.EvaluateOptions(runHits, set.qrels, ks, eval.Options{Queries: set.ids})
	if err != nil {
		return nil, err
	}
	rep.Fill = fill
	judged := make(data.Qrels, len(set.ids))
	for _, q := range set.ids {
		if j, ok := set.qrels[q]; ok {
			judged[q] = j
		}
	}
	files, err := writeEvalFiles(g, run, o.Out, rep, runHits, judged, string(o.Retriever.Mode))
	if err != nil {
		return nil, err
	}
	if err := run.LogMetrics(rep.Mean, 0); err != nil {
		return nil, err
	}
	res = &evalRetrievalResult{
		RunID: run.ID, Retriever: string(o.Retriever.Mode), Chunks: len(chunks), Queries: len(rep.Queries), Judged: len(rep.Judged), Unjudged: len(rep.Unjudged),
		Relevance: set.relevance, Ks: rep.Ks, Depth: o.Depth, Shortfall: len(fill.Short()), Qrels: set.check,
		Metrics: rep.Mean, MetricsJudged: rep.MeanJudged, Files: files, Seconds: time.Since(start).Seconds(),
	}
	if o.Retriever.Mode == search.Hybrid {
		res.DenseWeight, res.BM25Weight, res.WeightsFrom = o.Retriever.DenseWeight, o.Retriever.BM25Weight, o.Retriever.WeightsFrom
		if err := run.LogMetrics(map[string]float64{"hybrid/dense_weight": res.DenseWeight, "hybrid/bm25_weight": res.BM25Weight}, 0); err != nil {
			return nil, err
		}
	}
	if !g.JSON {
		if err := printEvalRetrieval(g, res, rep); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// validate checks the flags before any work and returns the cutoffs.
func (o *evalRetrievalOptions) validate() ([]int, error) {
	switch {
	case o.Pseudo != "" && o.Pseudo != "ict":
		return nil, fmt.Errorf("--pseudo-queries %q: want ict", o.Pseudo)
	case o.Pseudo != "" && o.QA != "":
		return nil, fmt.Errorf("--pseudo-queries and --qa exclude each other (pseudo-queries are the questions)")
	case o.Pseudo == "" && o.QA == "":
		return nil, fmt.Errorf("--qa is required (or --pseudo-queries ict)")
	case o.PseudoKeep < 0 || o.PseudoKeep > 1:
		return nil, fmt.Errorf("--pseudo-keep %v: want a fraction in [0, 1]", o.PseudoKeep)
	}
	ks, err := parseInts(o.Ks, "k")
	if err != nil {
		return nil, err
	}
	if _, err := o.Retriever.bm25Config(); err != nil {
		return nil, fmt.Errorf("--bm25-k1/--bm25-b/--analyzer: %w", err)
	}
	if o.Retriever.Union && o.Retriever.Mode != search.Hybrid {
		return nil, fmt.Errorf("--union applies to --retriever hybrid only, not %s", o.Retriever.Mode)
	}
	if o.Relevance != eval.RelevanceContains && o.Relevance != eval.RelevanceSpan {
		return nil, fmt.Errorf("--relevance %q: want contains or span", o.Relevance)
	}
	if maxK := slices.Max(ks); o.Depth < maxK {
		return nil, fmt.Errorf("--depth %d: below the largest --k %d", o.Depth, maxK)
	}
	return ks, o.Retriever.validate()
}

// evalQuerySet is the questions of an evaluation and their judgments.
type evalQuerySet struct {
	queries   []data.Query // the evaluated ones (--limit)
	ids       []string     // their ids
	qrels     data.Qrels
	relevance string // "qrels" (BEIR), the QA-CSV rule, or "ict" (--pseudo-queries)
	check     eval.QrelsCheck
	index     []data.Chunk // --pseudo-queries: the chunks to index in place of the corpus's
}

// querySet loads --qa, judges a QA CSV by the --relevance rule, and warns
// about judgments naming ids the evaluation does not know (BEIR qrels name
// documents, the QA-CSV rule chunks).
func (o *evalRetrievalOptions) querySet(ctx context.Context, g *globals, docs []data.Document, chunks []data.Chunk) (*evalQuerySet, error) {
	var queries []data.Query
	var qrels data.Qrels
	var index []data.Chunk
	if o.Pseudo != "" {
		ict, err := label.ICTQueries(ctx, chunks, label.ICTOptions{PerChunk: 1, Keep: o.PseudoKeep, Seed: o.Seed})
		if err != nil {
			return nil, err
		}
		queries, qrels, index = ict.Queries, ict.Qrels, ict.Chunks
	} else {
		var err error
		if queries, qrels, err = data.OpenQueries(o.QA, o.Split); err != nil {
			return nil, err
		}
	}
	allQueryIDs := make([]string, len(queries))
	for i, q := range queries {
		allQueryIDs[i] = q.ID
	}
	if o.Limit > 0 && o.Limit < len(queries) {
		queries = queries[:o.Limit]
	}
	set := &evalQuerySet{queries: queries, ids: allQueryIDs[:len(queries)], qrels: qrels, relevance: eval.RelevanceQrels, index: index}
	if index != nil {
		// ICT judgments are chunk-level, of the chunks indexed in place of the corpus.
		set.relevance = o.Pseudo
		set.check = eval.CheckQrels(qrels, allQueryIDs, eval.JudgedIDs(false, docs, chunks))
	} else {
		j, err := eval.Judge(queries, allQueryIDs, qrels, docs, chunks, o.Relevance)
		if err != nil {
			return nil, err
		}
		set.qrels, set.relevance, set.check = j.Qrels, j.Relevance, j.Check
	}
	warnQrels(g, set.check)
	return set, nil
}

// printEvalRetrieval prints the human summary and the metric table.
func printEvalRetrieval(g *globals, res *evalRetrievalResult, rep *eval.Report) error {
	fmt.Fprintf(g.Out, "run %s: %s over %d chunks, %d questions (%d without relevant chunks, scored 0), relevance %s\n",
		res.RunID, res.Retriever, res.Chunks, len(rep.Queries), len(rep.Unjudged), res.Relevance)
	if res.Retriever == string(search.Hybrid) {
		from := "flags/defaults"
		if res.WeightsFrom != "" {
			from = res.WeightsFrom
		}
		fmt.Fprintf(g.Out, "hybrid weights: dense %.2f, bm25 %.2f (%s)\n", res.DenseWeight, res.BM25Weight, from)
	}
	fmt.Fprintln(g.Out)
	if err := rep.Table(g.Out, rep.Ks); err != nil {
		return err
	}
	fmt.Fprintf(g.Out, "\nper-query metrics: %s\nTREC run: %s\nTREC qrels: %s\n", res.Files["per_query"], res.Files["trec"], res.Files["qrels"])
	return nil
}

// warnQrels tells stderr about judgments naming unknown queries or
// documents (trec_eval and pytrec_eval ignore them silently).
func warnQrels(g *globals, c eval.QrelsCheck) {
	first := func(ids []string) string {
		if len(ids) > 3 {
			return strings.Join(ids[:3], ", ") + ", ..."
		}
		return strings.Join(ids, ", ")
	}
	if n := len(c.UnknownQueries); n > 0 {
		fmt.Fprintf(g.Err, "warning: qrels: %d judged queries are not in the query set and are not evaluated (%s)\n", n, first(c.UnknownQueries))
	}
	if c.UnknownDocs > 0 {
		fmt.Fprintf(g.Err, "warning: qrels: %d judgments name %d ids absent from the corpus; they still count as relevant (%s)\n",
			c.UnknownDocs, len(c.UnknownDocIDs), first(c.UnknownDocIDs))
	}
}

func writeEvalFiles(g *globals, run *tracker.Run, out string, rep *eval.Report, hits eval.Run, qrels data.Qrels, tag string) (map[string]string, error) {
	dir, err := runDir(g, run.ID, out)
	if err != nil {
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
