package demo

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/train/filtertrain"
)

// evalWindows are the windows the demo evaluates and calibrates the filter
// at (evalSeqLength), over the checkpoint's own.
var evalWindows = filtertrain.WindowsRequest{MaxSeqLength: evalSeqLength, DocStride: docStride, SetMaxSeqLength: true, SetDocStride: true}

// calibrateFilter fits train calibration of the trained filter on the
// training questions' evidence labels (the evidence labels minus the
// held-out examples of filter/valid.jsonl, which the split made by
// question), with coverage's IDF over the ICT evidence the filter trained
// on; and, as a baseline, the word-overlap features without the T5. The
// calibrated filter is the one evaluated, exported and served.
func calibrateFilter(ctx context.Context, st *state) (Stage, error) {
	data, n, err := st.trainingQuestions()
	if err != nil {
		return Stage{}, err
	}
	t5 := st.filterMembers[0]
	var cmds []string
	var run *filtertrain.CalibrationRun
	for _, c := range []struct {
		name     string
		features []string
	}{
		{"filter-calibrated", filter.CalibrationFeatures},
		{"filter-words-only", []string{filter.FeatureCoverage, filter.FeatureLevelSum}},
	} {
		job := filtertrain.CalibrationJob{Model: t5, Data: data, IDFFrom: filepath.Join(st.dirs["filter-out"], "train.jsonl"), Out: st.fresh(c.name),
			Windows: evalWindows, Note: st.log, Opt: filtertrain.CalibrateOptions{Features: c.features, L2: 1}}
		job.Opt.BatchSize, job.Opt.Backend = 16, st.o.Backend
		bar := progress.New(st.log, -1, "train calibration")
		job.Opt.Progress = bar.Func()
		err := st.record(func(start tracker.Starter) error {
			var err error
			run, err = filtertrain.RunCalibration(job, start)
			return err
		})
		bar.Finish()
		if err != nil {
			return Stage{}, err
		}
		st.dirs[c.name] = run.Report.Out
		cmds = append(cmds, st.command("train", "calibration", "--model", t5, "--data", data, "--idf-from", job.IDFFrom,
			"--features", strings.Join(c.features, ","), "--max-seq-length", itoa(evalSeqLength), "--doc-stride", itoa(docStride), "--out", job.Out))
	}
	st.dirs["filter-t5"] = t5
	st.filterMembers = []string{st.dirs["filter-calibrated"]}
	return Stage{Command: strings.Join(cmds, "\n  "), RunID: run.RunID, Artifacts: []string{data, st.dirs["filter-calibrated"]},
		Metrics: map[string]float64{"examples": float64(n)}}, nil
}

// trainingQuestions writes the evidence labels of the questions the filter
// training did not hold out (its valid.jsonl) to labels/evidence-train.jsonl
// and returns that file and its example count.
func (st *state) trainingQuestions() (string, int, error) {
	all, err := filter.ReadExamples(st.dirs["labels"])
	if err != nil {
		return "", 0, err
	}
	held, err := filter.ReadExamples(filepath.Join(st.dirs["filter-out"], "valid.jsonl"))
	if err != nil {
		return "", 0, err
	}
	out := map[string]bool{}
	for _, ex := range held {
		out[ex.ID] = true
	}
	var train []filter.Example
	for _, ex := range all {
		if !out[ex.ID] {
			train = append(train, ex)
		}
	}
	data := st.path("labels", "evidence-train.jsonl")
	return data, len(train), filter.WriteJSONL(data, train)
}

// evalFilter evaluates the last checkpoint (not the one with the best
// validation accuracy, which would choose it on the very labels reported)
// on the held-out questions; a calibrated filter beside the T5 alone and
// the word-overlap scores alone. The filter evaluated here is the one
// export ships (shippedFilter).
func evalFilter(ctx context.Context, st *state) (Stage, error) {
	res, cmd, err := st.evalFilter(st.filterMembers, "filter-eval", evalWindows)
	if err != nil {
		return Stage{}, err
	}
	rep := res.Report
	cmds := []string{cmd}
	m := map[string]float64{"accuracy": rep.Accuracy, "F1": rep.F1, "majority_baseline": rep.MajorityBaseline}
	const model = "filter (held-out questions)"
	vs := []tracker.Versus{{Model: model, Metric: "accuracy", Learned: rep.Accuracy, Baseline: "majority class", Value: rep.MajorityBaseline}}
	if rep.ROCAUC == nil {
		return Stage{Command: cmds[0], RunID: res.RunID, Metrics: m, Versus: vs, Artifacts: []string{res.Dir}}, nil
	}
	m["ROC-AUC"] = *rep.ROCAUC
	vs = append(vs, tracker.Versus{Model: model, Metric: "ROC-AUC", Learned: *rep.ROCAUC, Baseline: "chance", Value: 0.5})
	if st.dirs["filter-t5"] != "" {
		for _, b := range []struct{ dir, name, key string }{
			{st.dirs["filter-t5"], "the T5 alone (uncalibrated)", "ROC-AUC_t5_alone"},
			{st.dirs["filter-words-only"], "word-overlap scores alone", "ROC-AUC_words_alone"},
		} {
			r, cmd, err := st.evalFilter([]string{b.dir}, "filter-eval-"+strings.TrimPrefix(b.key, "ROC-AUC_"), evalWindows)
			if err != nil {
				return Stage{}, err
			}
			cmds = append(cmds, cmd)
			if a := r.Report.ROCAUC; a != nil {
				m[b.key] = *a
				vs = append(vs, tracker.Versus{Model: model, Metric: "ROC-AUC", Learned: *rep.ROCAUC, Baseline: b.name, Value: *a})
			}
		}
	}
	return Stage{Command: strings.Join(cmds, "\n  "), RunID: res.RunID, Metrics: m, Versus: vs, Artifacts: []string{res.Dir}}, nil
}

// evalFilter runs eval filter of models (an ensemble when more than one) on
// the held-out questions into the work directory out, at windows (none
// set: the filter's own, as exported); it returns the result and the
// equivalent command.
func (st *state) evalFilter(models []string, out string, windows filtertrain.WindowsRequest) (*filtertrain.EvalRun, string, error) {
	job := filtertrain.EvalJob{Models: models, Data: filepath.Join(st.dirs["filter-out"], "valid.jsonl"), Out: st.fresh(out),
		Windows: windows, Note: st.log, Eval: filtertrain.EvalOptions{BatchSize: 16, Threshold: 0.5, Backend: st.o.Backend}}
	bar := progress.New(st.log, -1, "eval filter")
	job.Eval.Progress = bar.Func()
	var res *filtertrain.EvalRun
	err := st.record(func(start tracker.Starter) error {
		var err error
		res, err = filtertrain.RunEval(job, start)
		return err
	})
	bar.Finish()
	args := []string{"eval", "filter"}
	for _, m := range models {
		args = append(args, "--model", m)
	}
	args = append(args, "--data", job.Data)
	if windows.SetMaxSeqLength {
		args = append(args, "--max-seq-length", itoa(windows.MaxSeqLength), "--doc-stride", itoa(windows.DocStride))
	}
	return res, st.command(append(args, "--out", job.Out)...), err
}
