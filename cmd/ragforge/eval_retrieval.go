package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/retrieval/eval"
	"github.com/ragforge/ragforge/retrieval/evalrun"
	"github.com/ragforge/ragforge/retrieval/search"
)

// evalRetrievalOptions are the flags of `eval retrieval`: evalrun.Config,
// stored as the run's config.
type evalRetrievalOptions struct{ evalrun.Config }

// evalRetrievalResult is what --json prints.
type evalRetrievalResult = evalrun.Result

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
	o.addFlags(cmd)
	return cmd
}

func (o *evalRetrievalOptions) addFlags(cmd *cobra.Command) {
	addCorpusFlags(cmd, &o.Corpus)
	addRetrieverFlags(cmd, &o.Retriever)
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
}

// runEvalRetrieval records an eval-retrieval run of o (evalrun.Evaluate)
// and prints its summary unless --json.
func runEvalRetrieval(ctx context.Context, g *globals, o evalRetrievalOptions) (res *evalRetrievalResult, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	o.Backend, o.Log, o.PseudoQueries = g.Backend, g.Err, label.ICTPseudoQueries
	if _, err := o.Check(); err != nil {
		return nil, err
	}
	st, run, err := startRun(g, evalrun.Kind, o)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	defer finishRun(run, &err)
	cfg := o.Config
	if cfg.Out == "" {
		cfg.Out = tracker.RunDir(g.DB, run.ID)
	}
	if res, err = evalrun.Evaluate(ctx, cfg, run); err != nil {
		return nil, err
	}
	if !g.JSON {
		if err := printEvalRetrieval(g, res, res.Report); err != nil {
			return nil, err
		}
	}
	return res, nil
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
