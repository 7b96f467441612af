package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/evalrun"
)

// openLabels opens the run store and the label tables inside it.
func openLabels(g *globals) (*tracker.Store, *labelstore.Store, error) {
	st, err := openStore(g)
	if err != nil {
		return nil, nil, err
	}
	ls, err := labelstore.NewStore(st.DB())
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, ls, nil
}

// candidateFlags build BM25 candidates for questions of a QA CSV.
type candidateFlags struct {
	Corpus corpusFlags  `json:"corpus"`
	QA     string       `json:"qa"`
	TopN   int          `json:"top_n"`
	Limit  int          `json:"limit"` // 0: all
	Out    string       `json:"out,omitempty"`
	BM25   evalrun.BM25 `json:"bm25"`
}

func (c *candidateFlags) add(cmd *cobra.Command) {
	c.Corpus.add(cmd)
	addBM25Flags(cmd, &c.BM25)
	f := cmd.Flags()
	f.StringVar(&c.QA, "qa", "", "questions with reference answers and contexts: AP QA CSV or BEIR dir (required)")
	f.IntVar(&c.TopN, "top-n", 10, "BM25 candidates per question")
	f.IntVar(&c.Limit, "limit", 0, "label only the first N questions (0 = all)")
	minInt(f, 1, "top-n")
	minInt(f, 0, "limit")
	f.StringVar(&c.Out, "out", "", "also write the labels in the RAG² filter schema (.json or .jsonl)")
}

// load reads the questions and the BM25 index over the corpus's chunks
// (label.LoadCandidates).
func (c *candidateFlags) load(g *globals) ([]data.Query, data.Qrels, *bm25.Index, error) {
	return label.LoadCandidates(c.QA, c.Limit, &c.Corpus.Corpus, c.BM25, g.Err)
}

// labelResult is what a labeling command stored (the tests and the demo read it).
type labelResult = label.Result

// printLabelRun summarizes the labels run stored in ls (label.Summarize,
// writing out when set; n labels this process made) and prints them.
func printLabelRun(g *globals, run *tracker.Run, ls *labelstore.Store, out string, n int) error {
	res, err := label.Summarize(run, ls, out, n)
	if err != nil {
		return err
	}
	return printLabels(g, res)
}

// printLabels prints a labeling run's result, as JSON with --json.
func printLabels(g *globals, r label.Result) error {
	if g.JSON {
		return printJSON(g.Out, r)
	}
	fmt.Fprintf(g.Out, "run %s: %d labels stored (%s %d, %s %d)", r.RunID, r.Labels, filter.Helpful, r.Counts[filter.Helpful], filter.NotHelpful, r.Counts[filter.NotHelpful])
	if r.Merged > 0 {
		fmt.Fprintf(g.Out, "; %d duplicate (question, snippet) pairs merged", r.Merged)
	}
	fmt.Fprintln(g.Out)
	if r.Out != "" {
		fmt.Fprintf(g.Out, "wrote %s\n", r.Out)
	}
	return nil
}

// datasetName is flag, or else the corpus's name: its base name without
// extension ("ap_protocols" for ../shared/data/ap_protocols, "corpus" for
// corpus.jsonl), the name a Hugging Face dataset directory carries.
func datasetName(flag, corpus string) string {
	if flag != "" {
		return flag
	}
	base := filepath.Base(strings.TrimRight(corpus, "/"))
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// labelEvidenceOptions are the flags of `label evidence`.
type labelEvidenceOptions struct {
	Candidates  candidateFlags
	Negatives   int // [NOT_HELPFUL] kept per question; 0 = all
	Balanced    bool
	Seed        uint64
	DatasetName string
}

func newLabelEvidenceCmd(g *globals) *cobra.Command {
	var o labelEvidenceOptions
	cmd := &cobra.Command{
		Use:   "evidence",
		Short: "Label BM25 top-N candidates [HELPFUL] when they contain the question's reference context",
		Long: `For each question, retrieves the BM25 top-N chunks and labels a chunk
[HELPFUL] when it contains the reference context by the AP paper's rule (the
normalized context is a substring of the chunk or shares >= 5 consecutive
tokens), or, for BEIR data, when qrels judge its document relevant.`,
		Example: `  ragforge label evidence --corpus ../shared/data/ap_protocols --qa ../shared/data/ap_protocols_qa/dev.csv --top-n 10 --out labels.jsonl`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLabelEvidence(cmdContext(cmd), g, o)
		},
	}
	o.Candidates.add(cmd)
	f := cmd.Flags()
	f.IntVar(&o.Negatives, "negatives", 0, "keep at most N [NOT_HELPFUL] candidates per question (0 = all)")
	f.BoolVar(&o.Balanced, "balanced", false, "keep as many negatives as positives per question")
	minInt(f, 0, "negatives")
	f.Uint64Var(&o.Seed, "seed", 42, "negative sampling seed")
	f.StringVar(&o.DatasetName, "dataset-name", "", "dataset_name written to each example (default: the corpus name, e.g. ap_protocols for .../ap_protocols)")
	return cmd
}

func runLabelEvidence(ctx context.Context, g *globals, o labelEvidenceOptions) (err error) {
	c := o.Candidates
	queries, qrels, idx, err := c.load(g)
	if err != nil {
		return err
	}
	defer idx.Close()
	r, start := startRunOf(g)
	defer r.finish(&err)
	var bar *progress.Bar
	res, err := label.RunEvidence(ctx, label.EvidenceJob{Queries: queries, Qrels: qrels, Index: idx, Out: c.Out, Flags: c, Progress: func(done, total int) { bar.Set(done, total) },
		Labeler: label.EvidenceLabeler{TopN: c.TopN, NegativesPerQuestion: o.Negatives, Balanced: o.Balanced, Seed: o.Seed, DatasetName: datasetName(o.DatasetName, c.Corpus.Path)}}, barOnStart(start, &bar, g.Err, len(queries), "evidence labels"))
	bar.Finish()
	if err != nil {
		return err
	}
	return printLabels(g, res)
}

func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
