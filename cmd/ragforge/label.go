package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/retrieval/bm25"
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
	Corpus corpusFlags `json:"corpus"`
	QA     string      `json:"qa"`
	TopN   int         `json:"top_n"`
	Limit  int         `json:"limit"` // 0: all
	Out    string      `json:"out,omitempty"`
	BM25   bm25Flags   `json:"bm25"`
}

func (c *candidateFlags) add(cmd *cobra.Command) {
	c.Corpus.add(cmd)
	c.BM25.add(cmd)
	f := cmd.Flags()
	f.StringVar(&c.QA, "qa", "", "questions with reference answers and contexts: AP QA CSV or BEIR dir (required)")
	f.IntVar(&c.TopN, "top-n", 10, "BM25 candidates per question")
	f.IntVar(&c.Limit, "limit", 0, "label only the first N questions (0 = all)")
	minInt(f, 1, "top-n")
	minInt(f, 0, "limit")
	f.StringVar(&c.Out, "out", "", "also write the labels in the RAG² filter schema (.json or .jsonl)")
}

func (c *candidateFlags) load(g *globals) ([]data.Query, data.Qrels, *bm25.Index, error) {
	if c.QA == "" {
		return nil, nil, nil, fmt.Errorf("--qa is required")
	}
	cfg, err := c.BM25.config()
	if err != nil {
		return nil, nil, nil, err
	}
	queries, qrels, err := data.OpenQueries(c.QA, "test")
	if err != nil {
		return nil, nil, nil, err
	}
	if c.Limit > 0 && c.Limit < len(queries) {
		queries = queries[:c.Limit]
	}
	_, chunks, err := c.Corpus.load(g)
	if err != nil {
		return nil, nil, nil, err
	}
	idx, err := bm25.NewMemory(chunks, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	return queries, qrels, idx, nil
}

type labelResult struct {
	RunID string `json:"run_id"`
	// Labels is what the run stores; Merged the labels made for a (question,
	// snippet) pair already labeled in this run (duplicate questions), which
	// replace the earlier one instead of adding a row.
	Labels int            `json:"labels"`
	Merged int            `json:"duplicates_merged"`
	Counts map[string]int `json:"counts"`
	Out    string         `json:"out,omitempty"`
}

func (r labelResult) print(g *globals) error {
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

func finishLabels(g *globals, run *tracker.Run, ls *labelstore.Store, out string, n int) (labelResult, error) {
	counts, err := ls.Counts(run.ID)
	if err != nil {
		return labelResult{}, err
	}
	for k, v := range counts {
		if err := run.Metric("labels_"+strings.Trim(strings.ToLower(k), "[]"), 0, float64(v)); err != nil {
			return labelResult{}, err
		}
	}
	if out != "" {
		format, err := filter.FormatOf("", out)
		if err != nil {
			return labelResult{}, err
		}
		if _, err := ls.Export(run.ID, out, format); err != nil {
			return labelResult{}, err
		}
		if err := run.Artifact("labels", out); err != nil {
			return labelResult{}, err
		}
	}
	stored := counts[filter.Helpful] + counts[filter.NotHelpful]
	return labelResult{RunID: run.ID, Labels: stored, Merged: max(n-stored, 0), Counts: counts, Out: out}, nil
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
	st, run, err := startRun(g, "label-evidence", map[string]any{"flags": c, "negatives": o.Negatives, "balanced": o.Balanced, "seed": o.Seed})
	if err != nil {
		return err
	}
	defer st.Close()
	defer finishRun(run, &err)
	ls, err := labelstore.NewStore(st.DB())
	if err != nil {
		return err
	}
	bar := progress.New(g.Err, len(queries), "evidence labels")
	l := &label.EvidenceLabeler{Retriever: idx, Lookup: idx.Doc, TopN: c.TopN, NegativesPerQuestion: o.Negatives, Balanced: o.Balanced,
		Seed: o.Seed, DatasetName: datasetName(o.DatasetName, c.Corpus.Path), Store: ls, RunID: run.ID, Progress: label.Progress(bar.Func())}
	if qrels != nil {
		l.Qrels = qrels
	}
	labels, err := l.Label(ctx, queries)
	bar.Finish()
	if err != nil {
		return err
	}
	res, err := finishLabels(g, run, ls, c.Out, len(labels))
	if err != nil {
		return err
	}
	return res.print(g)
}

func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// newScorer builds a perplexity scorer from "t5:DIR", "hf:DIR" (a T5 or a
// Llama/Qwen2/Qwen3 decoder by config.json model_type) or
// "openai:URL[#model]".
func newScorer(g *globals, spec string, timeout time.Duration, retries, concurrency int) (lm.Scorer, error) {
	kind, target, model, err := splitSpec(spec, "scorer")
	if err != nil {
		return nil, err
	}
	switch kind {
	case "t5":
		m, tok, err := loadT5(g, target, nn.Auto)
		if err != nil {
			return nil, err
		}
		return lm.NewT5Scorer(target, m, tok), nil
	case "hf":
		m, err := lm.Load(target, g.Backend)
		if err != nil {
			return nil, fmt.Errorf("--scorer %q: %w", spec, err)
		}
		switch m := m.(type) {
		case *lm.T5: // the same scorer, and cache key, as t5:DIR
			return lm.NewT5Scorer(target, m.Model, m.Tokenizer), nil
		case *lm.Decoder:
			m.ID = "hf:" + target
			return m, nil
		}
		return nil, fmt.Errorf("--scorer %q: %s cannot score", spec, m.Name())
	case "openai":
		sc := lm.NewHTTPScorer(openai.New(target, openai.Options{Model: model, Timeout: timeout, MaxRetries: retries, Concurrency: concurrency}))
		// An encoder-decoder server (ragforge serve) scores (prompt, target)
		// as encoder input and labels, like t5:DIR; others use echo.
		if err := sc.Detect(context.Background()); err != nil {
			return nil, err
		}
		return sc, nil
	}
	return nil, fmt.Errorf("--scorer %q: want t5:DIR, hf:DIR or openai:URL[#model]", spec)
}

// labelPerplexityOptions are the flags of `label perplexity`.
type labelPerplexityOptions struct {
	Candidates  candidateFlags
	Scorers     []string // t5:DIR | hf:DIR | openai:URL[#model]; worker k uses Scorers[k % len]
	Work        workFlags
	Margin      float64
	Relative    bool
	Timeout     time.Duration
	Retries     int
	Concurrency int
	Resume      string // run id to continue
	DatasetName string
}

func newLabelPerplexityCmd(g *globals) *cobra.Command {
	var o labelPerplexityOptions
	cmd := &cobra.Command{
		Use:   "perplexity",
		Short: "Label BM25 candidates by whether they lower the scorer's perplexity of the reference answer (RAG²)",
		Long: `For each question and each BM25 candidate, computes the scorer LM's
perplexity of the reference answer (Ground_Truth) given the question without
the snippet and with it (templates in label.DefaultPromptTemplate). The snippet
is [HELPFUL] when it lowers perplexity by at least --margin (absolute, or
relative with --relative). Scorers: t5:DIR (local, teacher-forced),
hf:DIR (a local T5 or Llama/Qwen2/Qwen3 decoder chosen by config.json
model_type; a decoder scores prompt + " " + answer as vLLM's echo does, so
it matches the same checkpoint served by ragforge serve --llm hf:DIR; a
prompt over max_position_embeddings is an error, never truncated) or
openai:URL[#model], a server returning prompt log-probabilities with
echo=true (vLLM, ragforge serve); llama.cpp server and Ollama return only
generated-token log-probabilities and are refused with a clear error.
Scores are cached in the run database, so --resume RUN continues an
interrupted run without rescoring finished pairs.

Workers: --workers N labels with N workers in this process, claiming
batches of --batch-size questions from a queue in the run store; --job NAME
makes processes on several machines, started with the same flags and
--db postgres://…, work on one run named NAME (the first creates it and
the batches; a killed worker's batch returns to the queue when its --lease
expires; the worker that completes the last batch finishes the run and
writes --out). Repeat --scorer to give workers their own servers (worker k
uses the k-th, round robin); --concurrency is the limit per server. --shard
i/N instead labels every N-th question from the i-th, in its own run.`,
		Example: `  ragforge label perplexity --corpus ../shared/data/ap_protocols --qa ../shared/data/ap_protocols_qa/dev.csv --scorer t5:work/t5-tiny --limit 10
  # on each of several machines, one vLLM server per worker:
  ragforge --db postgres://ragforge@db.lab/ragforge label perplexity --corpus … --qa … --job ap-ppl-1 --scorer openai:http://127.0.0.1:8000/v1#qwen2-7b`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLabelPerplexity(cmdContext(cmd), g, o)
		},
	}
	o.Candidates.add(cmd)
	f := cmd.Flags()
	f.StringArrayVar(&o.Scorers, "scorer", nil, "scorer LM: t5:DIR, hf:DIR or openai:URL[#model] (required); repeat to give workers their own servers")
	f.Float64Var(&o.Margin, "margin", 0, "minimum perplexity reduction for [HELPFUL]")
	f.BoolVar(&o.Relative, "relative", false, "margin is relative: (ppl_without - ppl_with) / ppl_without")
	f.DurationVar(&o.Timeout, "timeout", 120*time.Second, "per-request timeout (HTTP scorer)")
	f.IntVar(&o.Retries, "retries", 3, "retries with exponential backoff (HTTP scorer)")
	f.IntVar(&o.Concurrency, "concurrency", 4, "pairs scored at once")
	minInt(f, 1, "concurrency")
	f.StringVar(&o.Resume, "resume", "", "continue the labeling run with this id (finished pairs come from the score cache)")
	o.Work.add(cmd)
	f.StringVar(&o.DatasetName, "dataset-name", "", "dataset_name written to each example (default: the corpus name, e.g. ap_protocols for .../ap_protocols)")
	return cmd
}

func runLabelPerplexity(ctx context.Context, g *globals, o labelPerplexityOptions) (err error) {
	if len(o.Scorers) == 0 {
		return fmt.Errorf("--scorer is required")
	}
	if err := o.Work.check(o.Resume); err != nil {
		return err
	}
	if len(o.Scorers) > 1 && !o.Work.queued() {
		return fmt.Errorf("%d --scorer values: several scorers need --workers or --job (worker k uses the k-th)", len(o.Scorers))
	}
	scorers := make([]lm.Scorer, len(o.Scorers))
	for i, spec := range o.Scorers {
		if scorers[i], err = newScorer(g, spec, o.Timeout, o.Retries, o.Concurrency); err != nil {
			return err
		}
	}
	sc := scorers[0]
	c := o.Candidates
	tasks, err := perplexityTasks(g, c)
	if err != nil {
		return err
	}
	if tasks, err = o.Work.shard(tasks); err != nil {
		return err
	}
	if o.Work.queued() {
		return runLabelPerplexityWorkers(ctx, g, o, scorers, tasks)
	}
	var st *tracker.Store
	var run *tracker.Run
	if o.Resume != "" {
		if st, err = openStore(g); err != nil {
			return err
		}
		if run, err = st.Resume(o.Resume); err != nil { // running again, owned by this process
			st.Close()
			return err
		}
	} else if st, run, err = startRun(g, "label-perplexity", o.Work.config(map[string]any{"flags": c, "scorer": sc.Name(), "margin": o.Margin, "relative": o.Relative})); err != nil {
		return err
	}
	defer st.Close()
	defer finishRun(run, &err)
	ls, err := labelstore.NewStore(st.DB())
	if err != nil {
		return err
	}
	bar := progress.New(g.Err, -1, "perplexity labels")
	l := &label.PerplexityLabeler{Scorer: sc, Margin: o.Margin, Relative: o.Relative, DatasetName: datasetName(o.DatasetName, c.Corpus.Path),
		Concurrency: o.Concurrency, Store: ls, RunID: run.ID, Progress: label.Progress(bar.Func())}
	labels, err := l.Label(ctx, tasks)
	bar.Finish()
	if err != nil {
		return err
	}
	res, err := finishLabels(g, run, ls, c.Out, len(labels))
	if err != nil {
		return err
	}
	return res.print(g)
}

// perplexityTasks pairs each question and its reference answer with its
// BM25 top-N candidates.
func perplexityTasks(g *globals, c candidateFlags) ([]label.Task, error) {
	queries, _, idx, err := c.load(g)
	if err != nil {
		return nil, err
	}
	defer idx.Close()
	var tasks []label.Task
	for _, q := range queries {
		if strings.TrimSpace(q.Answer) == "" {
			return nil, fmt.Errorf("%s: question %s: field %q: empty (perplexity labels need a reference answer)", c.QA, q.ID, "Ground_Truth")
		}
		hits, err := idx.Search(q.Text, c.TopN)
		if err != nil {
			return nil, err
		}
		t := label.Task{QueryID: q.ID, Question: q.Text, Target: q.Answer}
		for _, h := range hits {
			if ch, ok := idx.Doc(h.ID); ok {
				t.Candidates = append(t.Candidates, ch)
			}
		}
		tasks = append(tasks, t)
	}
	return tasks, nil
}
