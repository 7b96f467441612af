package main

import (
	"fmt"
	"path/filepath"
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
		RunE:    func(cmd *cobra.Command, _ []string) error { return runTrainCalibration(g, o) },
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

// runTrainCalibration fits the calibration of o.Model on o.Data, writes
// the calibrated checkpoint to o.Out and records the fit in a run.
func runTrainCalibration(g *globals, o trainCalibrationOptions) (err error) {
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
	if filepath.Clean(o.Out) == filepath.Clean(o.Model) {
		return fmt.Errorf("--out %s is the --model directory: the calibrated checkpoint is written beside it", o.Out)
	}
	if err := o.Windows.resolve([]string{o.Model}, g.Err); err != nil {
		return err
	}
	o.Opt.MaxSeqLength, o.Opt.DocStride = o.Windows.MaxSeqLength, o.Windows.DocStride
	examples, err := filter.ReadExamples(o.Data)
	if err != nil {
		return err
	}
	if o.IDFFrom != "" {
		if o.Opt.IDFEvidences, err = evidenceTexts(o.IDFFrom); err != nil {
			return err
		}
	}
	st, run, err := startRun(g, "train-calibration", map[string]any{"model": o.Model, "data": o.Data, "idf_from": o.IDFFrom,
		"features": o.Opt.Features, "l2": o.Opt.L2, "out": o.Out, "max_seq_length": o.Opt.MaxSeqLength, "doc_stride": o.Opt.DocStride, "windows_sources": o.Windows.Sources})
	if err != nil {
		return err
	}
	defer st.Close()
	defer finishRun(run, &err)
	bar := progress.New(g.Err, -1, "train calibration")
	o.Opt.Backend = g.Backend
	o.Opt.Progress = bar.Func()
	rep, err := filtertrain.Calibrate(o.Model, o.Out, examples, o.Opt)
	bar.Finish()
	if err != nil {
		return err
	}
	m := map[string]float64{"examples": float64(rep.N), "helpful": float64(rep.Helpful), "iterations": float64(rep.Iterations)}
	if rep.ROCAUCModel != nil && rep.ROCAUCCalibrated != nil {
		m["fit/roc_auc_model"], m["fit/roc_auc_calibrated"] = *rep.ROCAUCModel, *rep.ROCAUCCalibrated
	}
	if err := run.LogMetrics(m, 0); err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, map[string]any{"run_id": run.ID, "report": rep})
	}
	fmt.Fprintf(g.Out, "run %s: fitted on %d examples (%d %s) in %d Newton steps\n", run.ID, rep.N, rep.Helpful, filter.Helpful, rep.Iterations)
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

// evidenceTexts reads the evidence texts of a RAG² filter examples file,
// naming the file and example id of an instruction that is not RAG²'s.
func evidenceTexts(path string) ([]string, error) {
	examples, err := filter.ReadExamples(path)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(examples))
	for i, ex := range examples {
		if out[i], _, err = filter.ParseInstruction(strings.TrimSpace(ex.Question)); err != nil {
			return nil, fmt.Errorf("%s: example %q: field \"question\": %w", path, ex.ID, err)
		}
	}
	return out, nil
}
