package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/models/lm"
)

// newScorer builds a perplexity scorer from a --scorer spec (lm.OpenScorer).
func newScorer(g *globals, spec string, timeout time.Duration, retries, concurrency int) (lm.Scorer, error) {
	return lm.OpenScorer(context.Background(), spec, lm.ScorerOptions{Backend: g.Backend, Timeout: timeout, Retries: retries, Concurrency: concurrency})
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
	tasks, err := perplexityTasks(g, o.Candidates)
	if err != nil {
		return err
	}
	if tasks, err = o.Work.shard(tasks); err != nil {
		return err
	}
	if o.Work.queued() {
		return labelPerplexityWorkers(ctx, g, o, scorers, tasks)
	}
	return labelPerplexityOne(ctx, g, o, scorers[0], tasks)
}

// labelPerplexityOne labels tasks in this process with sc, in a new run
// or the --resume run (finished pairs come from the score cache).
func labelPerplexityOne(ctx context.Context, g *globals, o labelPerplexityOptions, sc lm.Scorer, tasks []label.Task) (err error) {
	c := o.Candidates
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
	return printLabelRun(g, run, ls, c.Out, len(labels))
}

// perplexityTasks pairs each question and its reference answer with its
// BM25 top-N candidates (label.PerplexityTasks).
func perplexityTasks(g *globals, c candidateFlags) ([]label.Task, error) {
	queries, _, idx, err := c.load(g)
	if err != nil {
		return nil, err
	}
	defer idx.Close()
	return label.PerplexityTasks(queries, idx, c.TopN, c.QA)
}
