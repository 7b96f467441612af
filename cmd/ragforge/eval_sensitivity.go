package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/infer/eval/sensitivity"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/retrieval/eval"
)

// evalSensitivityOptions are the flags of `eval sensitivity`.
type evalSensitivityOptions struct {
	Corpus    corpusFlags
	Retriever retrieverFlags
	Variants  string
	Ks        string
	Scorer    string // t5:DIR | openai:URL[#model] | ""
	Prompt    string
	Relevance string // contains | span
	Timeout   time.Duration
}

func newEvalSensitivityCmd(g *globals) *cobra.Command {
	var o evalSensitivityOptions
	cmd := &cobra.Command{
		Use:   "sensitivity",
		Short: "Retrieval metrics and perplexity per question formulation (short, long, paraphrased, yes/no, WH, ...) and their correlation",
		Long: `Reads question variants (CSV or JSONL with question_id, variant, text and
the reference context), retrieves for every variant, reports retrieval metrics
per variant, each variant's perplexity under --scorer (optional), and the
Pearson and Spearman correlations of perplexity and length with each metric.`,
		Example: `  ragforge eval sensitivity --corpus ../shared/data/ap_protocols --variants variants.csv --scorer t5:work/t5-tiny`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEvalSensitivity(cmdContext(cmd), g, o)
		},
	}
	o.Corpus.add(cmd)
	o.Retriever.add(cmd)
	f := cmd.Flags()
	f.StringVar(&o.Variants, "variants", "", "variants file: CSV or JSONL with question_id, variant, text, context (required)")
	f.StringVar(&o.Ks, "k", "1,2,4,8", "retrieval cutoffs")
	f.StringVar(&o.Scorer, "scorer", "", "perplexity scorer: t5:DIR, hf:DIR or openai:URL[#model] (optional)")
	f.StringVar(&o.Prompt, "prompt", "", "conditioning text for the perplexity of each variant (default none)")
	f.StringVar(&o.Relevance, "relevance", "contains", "relevance rule: contains | span")
	f.DurationVar(&o.Timeout, "timeout", 120*time.Second, "per-request timeout (HTTP scorer)")
	return cmd
}

func runEvalSensitivity(ctx context.Context, g *globals, o evalSensitivityOptions) (err error) {
	if o.Variants == "" {
		return fmt.Errorf("--variants is required")
	}
	kv, err := parseInts(o.Ks, "k")
	if err != nil {
		return err
	}
	if err := o.Retriever.validate(); err != nil {
		return err
	}
	vs, err := sensitivity.ReadVariants(o.Variants)
	if err != nil {
		return err
	}
	var sc lm.Scorer
	if o.Scorer != "" {
		if sc, err = newScorer(g, o.Scorer, o.Timeout, 3, 4); err != nil {
			return err
		}
	}
	st, run, err := startRun(g, "eval-sensitivity", map[string]any{"corpus": o.Corpus, "retriever": o.Retriever, "variants": o.Variants, "ks": kv, "scorer": o.Scorer})
	if err != nil {
		return err
	}
	defer st.Close()
	defer finishRun(run, &err)
	docs, chunks, err := o.Corpus.load(g)
	if err != nil {
		return err
	}
	rule := eval.Rule{}
	if o.Relevance == "span" {
		rule = eval.SpanRule(docs)
	}
	qrels, err := eval.BuildQrels(sensitivity.Queries(vs), chunks, rule)
	if err != nil {
		return err
	}
	r, closeR, err := o.Retriever.build(g, chunks)
	if err != nil {
		return err
	}
	defer closeR()
	bar := progress.New(g.Err, len(vs), "variants")
	rep, err := sensitivity.Evaluate(ctx, sensitivity.Config{Ks: kv, Prompt: o.Prompt}, vs, r, qrels, sc, run, bar.Func())
	bar.Finish()
	if err != nil {
		return err
	}
	if g.JSON {
		rep.Points = nil
		return printJSON(g.Out, map[string]any{"run_id": run.ID, "report": rep})
	}
	printSensitivityReport(g, run.ID, len(vs), rep)
	return nil
}

// printSensitivityReport prints the means per variant, then the
// correlations.
func printSensitivityReport(g *globals, runID string, rows int, rep *sensitivity.Report) {
	fmt.Fprintf(g.Out, "run %s: %d variant rows, %d errors\n\n", runID, rows, rep.Errors)
	tw := tabwriter.NewWriter(g.Out, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "VARIANT\tN\tLENGTH\tPPL")
	for _, m := range rep.Metrics {
		fmt.Fprintf(tw, "\t%s", m)
	}
	fmt.Fprintln(tw)
	for _, v := range rep.Variants {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.2f", v.Variant, v.N, v.MeanLength, v.MeanPerplexity)
		for _, m := range rep.Metrics {
			fmt.Fprintf(tw, "\t%.3f", v.Means[m])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(g.Out, "\ncorrelations (pooled over variants):")
	for _, c := range rep.Correlations {
		if c.Defined {
			fmt.Fprintf(g.Out, "  %-10s ~ %-10s n=%d  pearson %+.3f  spearman %+.3f\n", c.X, c.Metric, c.N, c.Pearson, c.Spearman)
		} else {
			fmt.Fprintf(g.Out, "  %-10s ~ %-10s undefined: %s\n", c.X, c.Metric, c.Reason)
		}
	}
}
