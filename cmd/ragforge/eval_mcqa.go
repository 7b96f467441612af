package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/infer/eval/mcqa"
	"github.com/ragforge/ragforge/internal/progress"
)

type evalMCQAOptions struct {
	Benchmark   string          `json:"benchmark"`
	Datasets    string          `json:"datasets,omitempty"`
	Limit       int             `json:"limit"`
	Conditions  string          `json:"conditions"`
	Answerer    string          `json:"answerer,omitempty"`
	Pipeline    string          `json:"pipeline,omitempty"`
	Filter      string          `json:"filter,omitempty"`
	K           int             `json:"k"`
	Parse       string          `json:"parse"`
	Scorer      string          `json:"scorer,omitempty"`
	Outputs     string          `json:"outputs,omitempty"`
	Concurrency int             `json:"concurrency"`
	MaxFailures int             `json:"max_failures"`
	MaxTokens   int             `json:"max_tokens"`
	Timeout     time.Duration   `json:"timeout_ns"`
	Retries     int             `json:"retries"`
	Resume      string          `json:"-"`
	Templates   []mcqa.Template `json:"templates"`
}

func newEvalMCQACmd(g *globals) *cobra.Command {
	var o evalMCQAOptions
	cmd := &cobra.Command{
		Use:   "mcqa",
		Short: "Multiple-choice medical QA accuracy on MIRAGE under cot, rag, rag2 and rag2-nofilter (RAG²'s headline table)",
		Long: `Answers MIRAGE's questions (or a JSONL of {id, question, options, answer},
or RAG²'s format with the options inside the question) under each condition
with the same answerer, and reports accuracy per dataset and MIRAGE's average
with 95% intervals, parse failures, McNemar's exact test between conditions
and, for rag2, the snippets the filter kept.
  cot            no retrieval, MedRAG's chain-of-thought template
  rag            question-only retrieval of the top --k, MedRAG's RAG template
  rag2           the cot rationale as query, balanced retrieval, rerank, filter
  rag2-nofilter  rag2 without the filter
Retrieval goes through ragforge serve's /v1/retrieve and /v1/pipeline: --pipeline
is a served pipeline's URL or an exported pipeline directory (served in-process).
--parse strict (default) counts unreadable outputs as parse failures; --parse
mirage reproduces MIRAGE's scorer, which reads them as A. --outputs re-scores
stored outputs without a model. Every item is stored in the run; --resume RUN
continues a killed run without asking any question twice.`,
		Example: `  ragforge eval mcqa --benchmark ../shared/data/mirage/benchmark.json --limit 20 \
    --conditions cot,rag,rag2 --answerer openai:http://127.0.0.1:8080/v1 --pipeline http://127.0.0.1:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runEvalMCQA(cmdContext(cmd), g, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.Benchmark, "benchmark", "", "MIRAGE benchmark.json, or a JSON/JSONL of {id, question, options, answer} (required)")
	f.StringVar(&o.Datasets, "datasets", "", "datasets to run, comma-separated (default: all in the file)")
	f.IntVar(&o.Limit, "limit", 0, "first N questions of each dataset, ids sorted as strings (0 = all)")
	f.StringVar(&o.Conditions, "conditions", mcqa.CondCoT, "conditions: "+strings.Join(mcqa.AllConditions, ","))
	f.StringVar(&o.Answerer, "answerer", "", "answering model: openai:URL[#model] (chat server, ragforge serve included) or t5:DIR")
	f.StringVar(&o.Pipeline, "pipeline", "", "retrieval for rag/rag2: a ragforge serve URL, or an exported pipeline directory")
	f.StringVar(&o.Filter, "filter", "", "RAG² filter directory replacing the pipeline directory's (rag2)")
	f.IntVar(&o.K, "k", mcqa.DefaultK, "snippets retrieved per question (MedRAG's default 32)")
	f.StringVar(&o.Parse, "parse", mcqa.ParseStrict, "answer parsing: strict or mirage (MIRAGE's scorer, fallback to A included)")
	f.StringVar(&o.Scorer, "scorer", "", "option log-likelihood (acc, acc_norm) with t5:DIR or openai:URL[#model] (echo + logprobs)")
	f.StringVar(&o.Outputs, "outputs", "", "re-score stored outputs: JSONL of {id, raw} or MIRAGE's prediction tree")
	f.IntVar(&o.Concurrency, "concurrency", 4, "questions answered at once")
	f.IntVar(&o.MaxFailures, "max-failures", mcqa.DefaultMaxFailures, "questions failing after their retries that stop the run (resume it later)")
	f.IntVar(&o.MaxTokens, "max-tokens", mcqa.DefaultMaxTokens, "answer length bound in tokens")
	f.DurationVar(&o.Timeout, "timeout", 120*time.Second, "per-request timeout")
	f.IntVar(&o.Retries, "retries", 3, "retries with exponential backoff per request")
	f.StringVar(&o.Resume, "resume", "", "continue the eval-mcqa run with this id (stored questions are not asked again)")
	minInt(f, 0, "limit")
	minInt(f, 1, "k", "concurrency", "max-tokens", "max-failures")
	return cmd
}

func runEvalMCQA(ctx context.Context, g *globals, o evalMCQAOptions) (err error) {
	if o.Benchmark == "" {
		return fmt.Errorf("--benchmark is required")
	}
	if err := mcqa.ValidParse(o.Parse); err != nil {
		return fmt.Errorf("--parse: %w", err)
	}
	var names []string
	if o.Datasets != "" {
		for _, n := range strings.Split(o.Datasets, ",") {
			names = append(names, strings.TrimSpace(n))
		}
	}
	datasets, err := mcqa.Load(o.Benchmark, mcqa.LoadOptions{Datasets: names, Limit: o.Limit})
	if err != nil {
		return err
	}
	cfg := mcqa.Config{Conditions: strings.Split(o.Conditions, ","), K: o.K, Parse: o.Parse, Concurrency: o.Concurrency, MaxFailures: o.MaxFailures}
	o.Templates = mcqa.Templates()
	if o.Outputs != "" {
		return rescoreMCQA(g, o, cfg, datasets)
	}
	if err := cfg.Validate(o.Pipeline != ""); err != nil {
		return fmt.Errorf("--conditions/--k/--concurrency: %w", err)
	}
	deps, closeDeps, err := openMCQADeps(ctx, g, o)
	if err != nil {
		return err
	}
	defer closeDeps()
	st, run, err := startOrResumeMCQA(g, o)
	if err != nil {
		return err
	}
	defer st.Close()
	defer finishRun(run, &err)
	n := 0
	for _, d := range datasets {
		n += len(d.Questions)
	}
	bar := progress.New(g.Err, n, "questions")
	rep, err := mcqa.Run(ctx, cfg, datasets, deps, run, bar.Func())
	bar.Finish()
	if rep != nil {
		if perr := printMCQAReport(g, run.ID, rep); err == nil {
			err = perr
		}
	}
	return err
}

// startOrResumeMCQA starts an eval-mcqa run, or reopens --resume's.
func startOrResumeMCQA(g *globals, o evalMCQAOptions) (*tracker.Store, *tracker.Run, error) {
	if o.Resume == "" {
		return startRun(g, "eval-mcqa", o)
	}
	st, err := openStore(g)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*tracker.Store, *tracker.Run, error) {
		st.Close()
		return nil, nil, fmt.Errorf("--resume %s: %w", o.Resume, err)
	}
	d, err := st.Get(o.Resume)
	if err != nil {
		return fail(err)
	}
	if d.Kind != "eval-mcqa" {
		return fail(fmt.Errorf("a %s run, not eval-mcqa", d.Kind))
	}
	var prev evalMCQAOptions
	if err := jsonUnmarshal(d.Config, &prev); err != nil {
		return fail(fmt.Errorf("stored config: %w", err))
	}
	if err := sameSetup(prev, o); err != nil {
		return fail(err)
	}
	run, err := st.Resume(o.Resume)
	if err != nil {
		return fail(err)
	}
	return st, run, nil
}

// sameSetup refuses to resume a run with flags that change its answers:
// stored items would mix with answers from another setup. Datasets, limit,
// conditions and request settings may change.
func sameSetup(prev, o evalMCQAOptions) error {
	for _, f := range []struct {
		flag      string
		was, next any
	}{
		{"benchmark", prev.Benchmark, o.Benchmark}, {"answerer", prev.Answerer, o.Answerer},
		{"pipeline", prev.Pipeline, o.Pipeline}, {"filter", prev.Filter, o.Filter}, {"k", prev.K, o.K},
		{"scorer", prev.Scorer, o.Scorer}, {"max-tokens", prev.MaxTokens, o.MaxTokens},
	} {
		if f.was != f.next {
			return fmt.Errorf("--%s %v differs from the run's %v: its stored answers came from that setup", f.flag, f.next, f.was)
		}
	}
	return nil
}

// rescoreMCQA scores --outputs without a model.
func rescoreMCQA(g *globals, o evalMCQAOptions, cfg mcqa.Config, datasets []mcqa.Dataset) (err error) {
	for _, f := range []string{o.Answerer, o.Pipeline, o.Scorer, o.Resume} {
		if f != "" {
			return fmt.Errorf("--outputs re-scores stored outputs: --answerer, --pipeline, --scorer and --resume do not apply")
		}
	}
	outs, err := mcqa.ReadOutputs(o.Outputs, datasets)
	if err != nil {
		return fmt.Errorf("--outputs: %w", err)
	}
	st, run, err := startRun(g, "eval-mcqa", o)
	if err != nil {
		return err
	}
	defer st.Close()
	defer finishRun(run, &err)
	rep, err := mcqa.Rescore(cfg, datasets, outs, run)
	if err != nil {
		return err
	}
	return printMCQAReport(g, run.ID, rep)
}
