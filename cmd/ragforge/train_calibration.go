package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/train/filtertrain"
)

// trainCalibrationOptions are the flags of `train calibration`.
type trainCalibrationOptions struct {
	Model, Data, IDFFrom, Features, Out string
	Opt                                 filtertrain.CalibrateOptions
	Windows                             filterWindows
}

const trainCalibrationLong = `Fits a calibration of a trained filter on labeled examples it was not trained
on (RAG² filter schema) and writes the checkpoint with it to --out. The
calibrated P([HELPFUL]) is logistic regression over --features:

  log_odds   the T5's log(P / (1 − P)): alone, Platt scaling
  coverage   the IDF-weighted share of the question's words found in the
             evidence (IDF over the evidence texts of --idf-from)
  level_sum  the evidence's exact-match levels summed (the --match-marks
             rule), over 50

Words are compared by their first 5 letters, lowercased, diacritics
removed. The fit is sklearn's LogisticRegression default (L2 penalty, C = 1
as --l2 1, intercept unpenalized). The checkpoint's config.json records it
("ragforge_filter_calibration"); eval filter, serve and the pipeline then
report the calibrated probability, and the 0.5 threshold reads it.
Training from a calibrated checkpoint drops the calibration. Why the word
features (a random T5 reads which words match, not how much of the question
an evidence covers) and how they were chosen: docs/recipes.md.`

func newTrainCalibrationCmd(g *globals) *cobra.Command {
	var o trainCalibrationOptions
	cmd := &cobra.Command{
		Use:     "calibration",
		Short:   "Calibrate a filter checkpoint's P([HELPFUL]) on labeled examples (Platt scaling with word-overlap features)",
		Long:    trainCalibrationLong,
		Example: `  ragforge train calibration --model work/filter/checkpoint-1374 --data work/labels-train.jsonl --idf-from work/filter/train.jsonl --out work/filter-calibrated`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runTrainCalibration(cmd.Context(), g, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "filter checkpoint directory (required)")
	f.StringVar(&o.Data, "data", "", "labeled examples the filter was not trained on, RAG² filter schema (.json or .jsonl) (required)")
	f.StringVar(&o.IDFFrom, "idf-from", "", "examples whose distinct evidence texts give coverage's IDF, e.g. the filter's ICT train.jsonl (default: --data)")
	f.StringVar(&o.Features, "features", strings.Join(filter.CalibrationFeatures, ","), "comma-separated features, in this order: "+strings.Join(filter.CalibrationFeatures, ", "))
	f.Float64Var(&o.Opt.L2, "l2", 1, "L2 penalty on the feature weights (sklearn's 1/C)")
	f.StringVar(&o.Out, "out", "", "directory for the calibrated checkpoint (required; must not exist)")
	o.Windows.add(cmd)
	f.IntVar(&o.Opt.BatchSize, "batch-size", 16, "windows per batch")
	return cmd
}

// runTrainCalibration fits the calibration of o.Model on o.Data
// (filtertrain.RunCalibration: the calibrated checkpoint in o.Out, the fit
// recorded in a run) and prints it.
func runTrainCalibration(_ context.Context, g *globals, o trainCalibrationOptions) (err error) {
	switch {
	case o.Model == "" || o.Data == "" || o.Out == "":
		return fmt.Errorf("--model, --data and --out are required")
	case !(o.Opt.L2 > 0):
		return fmt.Errorf("--l2 %v: want > 0 (the fit needs a penalty to stay finite on separable examples)", o.Opt.L2)
	}
	o.Opt.Features = strings.Split(o.Features, ",")
	for i := range o.Opt.Features {
		o.Opt.Features[i] = strings.TrimSpace(o.Opt.Features[i])
	}
	if err := filter.CheckCalibrationFeatures(o.Opt.Features); err != nil {
		return fmt.Errorf("--features %q: %w", o.Features, err)
	}
	if o.Model, err = modelDir(g, "model", o.Model); err != nil {
		return err
	}
	r, start := startRunOf(g)
	defer r.finish(&err)
	var bar *progress.Bar
	o.Opt.Backend = g.Backend
	o.Opt.Progress = func(done, total int) { bar.Set(done, total) }
	res, err := filtertrain.RunCalibration(filtertrain.CalibrationJob{Model: o.Model, Data: o.Data, Out: o.Out, IDFFrom: o.IDFFrom,
		Windows: o.Windows.request(), Opt: o.Opt, Note: g.Err}, barOnStart(start, &bar, g.Err, -1, "train calibration"))
	bar.Finish()
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, res)
	}
	rep := res.Report
	fmt.Fprintf(g.Out, "run %s: fitted on %d examples (%d %s) in %d Newton steps\n", res.RunID, rep.N, rep.Helpful, filter.Helpful, rep.Iterations)
	fmt.Fprintf(g.Out, "weights: intercept %.4f", rep.Weights[0])
	for i, f := range rep.Features {
		fmt.Fprintf(g.Out, ", %s %.4f", f, rep.Weights[i+1])
	}
	fmt.Fprintln(g.Out)
	if rep.ROCAUCModel != nil && rep.ROCAUCCalibrated != nil {
		fmt.Fprintf(g.Out, "ROC-AUC on the fitted examples (in-sample): model %.4f, calibrated %.4f\n", *rep.ROCAUCModel, *rep.ROCAUCCalibrated)
	}
	fmt.Fprintf(g.Out, "calibrated checkpoint in %s\n", rep.Out)
	return nil
}
