package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/train/filtertrain"
)

// evalFilterOptions are the flags of `eval filter`.
type evalFilterOptions struct {
	Models    []string // one checkpoint, or an ensemble's members
	Data, Out string
	Eval      filtertrain.EvalOptions
	Windows   filterWindows
}

func newEvalFilterCmd(g *globals) *cobra.Command {
	var o evalFilterOptions
	cmd := &cobra.Command{
		Use:   "filter",
		Short: "Evaluate a filter checkpoint: accuracy, per-class accuracy, P/R/F1 of [HELPFUL], ROC-AUC, threshold sweep",
		Long: `P([HELPFUL]) is the softmax over the two label-token logits at the first
decoder step; an example's probability is its best window's. Given --model
more than once, the filters form an ensemble: an example's P([HELPFUL]) is
the mean of the members' (soft voting). A checkpoint trained with match
marks (train filter --match-marks) has its inputs marked as in training.
The windows default to the filter's own: its config.json's
ragforge_filter_windows (an export's or a calibrated checkpoint's: what it
was evaluated at), else its training_args.json's. Writes RAG²'s
dict_id_pred_results.json, final_eval_results.json and
final_eval_results_perClass.json into --out and stores the metrics in a run.`,
		Example: `  ragforge eval filter --model work/filter/best --data work/labels-test.jsonl --out work/filter-eval`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEvalFilter(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.Models, "model", nil, "filter checkpoint directory (with [HELPFUL]/[NOT_HELPFUL] tokens) (required; repeat for an ensemble)")
	f.StringVar(&o.Data, "data", "", "examples in the RAG² filter schema (.json or .jsonl) (required)")
	f.StringVar(&o.Out, "out", "", "directory for the RAG² result files (default runs/<run id>)")
	o.Windows.add(cmd)
	f.IntVar(&o.Eval.BatchSize, "batch-size", 16, "windows per batch")
	f.Float64Var(&o.Eval.Threshold, "threshold", 0.5, "predict [HELPFUL] when P([HELPFUL]) >= threshold")
	addDTypeFlag(cmd, (*dtypeFlag)(&o.Eval.DType)) // filtertrain.EvalOptions.DType
	return cmd
}

// runEvalFilter scores o.Data with the checkpoint(s) o.Models
// (filtertrain.RunEval: RAG²'s result files, metrics in a run) and prints
// the report.
func runEvalFilter(_ context.Context, g *globals, o evalFilterOptions) (err error) {
	if len(o.Models) == 0 || o.Data == "" {
		return fmt.Errorf("--model and --data are required")
	}
	for i, m := range o.Models {
		if m == "" {
			return fmt.Errorf("--model %d of %d: empty directory", i+1, len(o.Models))
		}
	}
	for i, m := range o.Models {
		if o.Models[i], err = modelDir(g, "model", m); err != nil {
			return err
		}
	}
	r, start := startRunOf(g)
	defer r.finish(&err)
	var bar *progress.Bar
	o.Eval.Backend = g.Backend
	o.Eval.Progress = func(done, total int) { bar.Set(done, total) }
	res, err := filtertrain.RunEval(filtertrain.EvalJob{Models: o.Models, Data: o.Data, Out: o.Out, RunsBase: tracker.RunsBase(g.DB),
		Windows: o.Windows.request(), Eval: o.Eval, Note: g.Err}, barOnStart(start, &bar, g.Err, -1, "eval filter"))
	bar.Finish()
	if err != nil {
		return err
	}
	return printEvalFilter(g, res)
}

func printEvalFilter(g *globals, res *filtertrain.EvalRun) error {
	rep := res.Report
	if g.JSON {
		rep.Predictions = nil
		return printJSON(g.Out, res)
	}
	auc := "n/a (one class)"
	if rep.ROCAUC != nil {
		auc = fmt.Sprintf("%.4f", *rep.ROCAUC)
	}
	fmt.Fprintf(g.Out, "run %s: %d examples (%d windows)\naccuracy %.4f  (majority-class baseline %.4f: always %s)\n",
		res.RunID, rep.N, rep.Windows, rep.Accuracy, rep.MajorityBaseline, rep.MajorityClass)
	fmt.Fprintf(g.Out, "[HELPFUL] precision %.4f recall %.4f F1 %.4f  ROC-AUC %s\n", rep.Precision, rep.Recall, rep.F1, auc)
	for _, k := range sortedKeys(rep.PerClass) {
		fmt.Fprintf(g.Out, "accuracy on %-14s %.4f\n", k, rep.PerClass[k])
	}
	for _, n := range res.Notes {
		fmt.Fprintln(g.Out, n)
	}
	fmt.Fprintf(g.Out, "files in %s\n", res.Dir)
	return nil
}
