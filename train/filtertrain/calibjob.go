package filtertrain

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/filter"
)

// CalibrationJob is one `ragforge train calibration`: fit the calibration
// of the filter Model on Data and write the calibrated checkpoint to Out.
type CalibrationJob struct {
	Model, Data, Out string
	// IDFFrom is an examples file whose distinct evidence texts give
	// coverage's IDF ("": Data's own).
	IDFFrom string
	Windows WindowsRequest
	// Opt holds the features, L2, batch size, backend and progress; its
	// windows and IDF evidences are set from Windows and IDFFrom.
	Opt  CalibrateOptions
	Note io.Writer // where window overrides are reported (nil: discarded)
}

// CalibrationRun is what RunCalibration did; `train calibration --json`
// prints it.
type CalibrationRun struct {
	Report *CalibrationReport `json:"report"`
	RunID  string             `json:"run_id"`
}

// RunCalibration resolves the windows, reads the examples, starts a run of
// kind "train-calibration", fits (Calibrate) and records the fit's
// figures. Errors: Out is Model, Calibrate's.
func RunCalibration(j CalibrationJob, start tracker.Starter) (*CalibrationRun, error) {
	if filepath.Clean(j.Out) == filepath.Clean(j.Model) {
		return nil, fmt.Errorf("--out %s is the --model directory: the calibrated checkpoint is written beside it", j.Out)
	}
	note := j.Note
	if note == nil {
		note = io.Discard
	}
	w, err := ResolveWindows([]string{j.Model}, j.Windows, note)
	if err != nil {
		return nil, err
	}
	opt := j.Opt
	opt.MaxSeqLength, opt.DocStride = w.MaxSeqLength, w.DocStride
	examples, err := filter.ReadExamples(j.Data)
	if err != nil {
		return nil, err
	}
	if j.IDFFrom != "" {
		if opt.IDFEvidences, err = EvidenceTexts(j.IDFFrom); err != nil {
			return nil, err
		}
	}
	run, err := start.Start("train-calibration", map[string]any{"model": j.Model, "data": j.Data, "idf_from": j.IDFFrom,
		"features": opt.Features, "l2": opt.L2, "out": j.Out, "max_seq_length": opt.MaxSeqLength, "doc_stride": opt.DocStride, "windows_sources": w.Sources})
	if err != nil {
		return nil, err
	}
	rep, err := Calibrate(j.Model, j.Out, examples, opt)
	if err != nil {
		return nil, err
	}
	res := &CalibrationRun{Report: rep}
	if run == nil {
		return res, nil
	}
	res.RunID = run.ID
	return res, run.LogMetrics(rep.Metrics(), 0)
}

// Metrics are the fit's figures as a run records them: examples, helpful,
// Newton iterations and the in-sample ROC-AUC of the model and the
// calibration (fit/roc_auc_*, when both classes occur).
func (r *CalibrationReport) Metrics() map[string]float64 {
	m := map[string]float64{"examples": float64(r.N), "helpful": float64(r.Helpful), "iterations": float64(r.Iterations)}
	if r.ROCAUCModel != nil && r.ROCAUCCalibrated != nil {
		m["fit/roc_auc_model"], m["fit/roc_auc_calibrated"] = *r.ROCAUCModel, *r.ROCAUCCalibrated
	}
	return m
}

// EvidenceTexts reads the evidence texts of a RAG² filter examples file,
// naming the file and example id of an instruction that is not RAG²'s.
func EvidenceTexts(path string) ([]string, error) {
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
