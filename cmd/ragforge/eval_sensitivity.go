package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/infer/sensitivity"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/retrieval/eval"
)

func init() { evalSubcommands = append(evalSubcommands, newEvalSensitivityCmd) }

func newEvalSensitivityCmd(g *globals) *cobra.Command {
	var (
		corpus    corpusFlags
		retr      retrieverFlags
		variants  string
		ks        string
		scorer    string
		prompt    string
		relevance string
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "sensitivity",
		Short: "Retrieval metrics and perplexity per question formulation (short, long, paraphrased, yes/no, WH, ...) and their correlation",
		Long: `Reads question variants (CSV or JSONL with question_id, variant, text and
the reference context), retrieves for every variant, reports retrieval metrics
per variant, each variant's perplexity under --scorer (optional), and the
Pearson and Spearman correlations of perplexity and length with each metric.`,
		Example: `  ragforge eval sensitivity --corpus ../shared/data/ap_protocols --variants variants.csv --scorer t5:work/t5-tiny`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if variants == "" {
				return fmt.Errorf("--variants is required")
			}
			kv, err := parseInts(ks, "k")
			if err != nil {
				return err
			}
			if err := retr.validate(); err != nil {
				return err
			}
			vs, err := sensitivity.ReadVariants(variants)
			if err != nil {
				return err
			}
			var sc sensitivity.Scorer
			if scorer != "" {
				if sc, err = newScorer(g, scorer, timeout, 3, 4); err != nil {
					return err
				}
			}
			st, run, err := startRun(g, "eval-sensitivity", map[string]any{"corpus": corpus, "retriever": retr, "variants": variants, "ks": kv, "scorer": scorer})
			if err != nil {
				return err
			}
			defer st.Close()
			defer finishRun(run, &err)
			docs, chunks, err := corpus.load(g)
			if err != nil {
				return err
			}
			rule := eval.Rule{}
			if relevance == "span" {
				rule = eval.SpanRule(docs)
			}
			qrels, err := eval.BuildQrels(sensitivity.Queries(vs), chunks, rule)
			if err != nil {
				return err
			}
			r, closeR, err := retr.build(g, chunks)
			if err != nil {
				return err
			}
			defer closeR()
			bar := progress.New(g.Err, len(vs), "variants")
			rep, err := sensitivity.Evaluate(cmdContext(cmd), sensitivity.Config{Ks: kv, Prompt: prompt}, vs, r, qrels, sc, run, bar.Func())
			bar.Finish()
			if err != nil {
				return err
			}
			if g.JSON {
				rep.Points = nil
				return printJSON(g.Out, map[string]any{"run_id": run.ID, "report": rep})
			}
			fmt.Fprintf(g.Out, "run %s: %d variant rows, %d errors\n\n", run.ID, len(vs), rep.Errors)
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
			return nil
		},
	}
	corpus.add(cmd)
	retr.add(cmd)
	f := cmd.Flags()
	f.StringVar(&variants, "variants", "", "variants file: CSV or JSONL with question_id, variant, text, context (required)")
	f.StringVar(&ks, "k", "1,2,4,8", "retrieval cutoffs")
	f.StringVar(&scorer, "scorer", "", "perplexity scorer: t5:DIR or openai:URL[#model] (optional)")
	f.StringVar(&prompt, "prompt", "", "conditioning text for the perplexity of each variant (default none)")
	f.StringVar(&relevance, "relevance", "contains", "relevance rule: contains | span")
	f.DurationVar(&timeout, "timeout", 120*time.Second, "per-request timeout (HTTP scorer)")
	return cmd
}
