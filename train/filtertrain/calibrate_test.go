package filtertrain

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/t5"
)

// FitLogistic reaches the optimum of its objective: the gradient of the
// penalized log-loss is zero there, on data that is not separable and on
// data that is (where only the penalty keeps the weights finite).
func TestFitLogisticGradientIsZero(t *testing.T) {
	for _, tc := range []struct {
		name string
		x    [][]float64
		y    []bool
		l2   float64
	}{
		{"overlapping", [][]float64{{0.1, 2}, {0.4, 1}, {0.5, 3}, {0.9, 0}, {0.3, 1}, {0.8, 2}}, []bool{false, false, true, true, true, false}, 1},
		{"separable", [][]float64{{-2}, {-1}, {1}, {2}}, []bool{false, false, true, true}, 0.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _, err := FitLogistic(tc.x, tc.y, tc.l2)
			if err != nil {
				t.Fatal(err)
			}
			g := make([]float64, len(w))
			for i, r := range tc.x {
				s := filter.Sigmoid(filter.Logit(w, r))
				if tc.y[i] {
					s--
				}
				g[0] += s
				for j, v := range r {
					g[j+1] += s * v
				}
			}
			for j := 1; j < len(w); j++ {
				g[j] += tc.l2 * w[j]
			}
			for j, v := range g {
				if math.Abs(v) > 1e-8 {
					t.Errorf("gradient[%d] = %g at weights %v, want 0", j, v, w)
				}
			}
		})
	}
	for _, bad := range []struct {
		x    [][]float64
		want string
	}{
		{[][]float64{{1}, {1, 2}}, "row 2 has 2 features"},
		{[][]float64{{1}, {math.NaN()}}, "row 2 holds NaN"},
	} {
		if _, _, err := FitLogistic(bad.x, []bool{true, false}, 1); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("FitLogistic(%v): %v, want %q", bad.x, err, bad.want)
		}
	}
}

// Calibrate writes a checkpoint whose Predict is the fitted map of the
// T5's own probability, which eval reads; training from it drops the
// calibration; nonsense inputs are refused before anything is written.
func TestCalibrate(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: trains a tiny T5 for one update")
	}
	cfg := tinyConfig(t, 0)
	cfg.Epochs, cfg.MaxSteps = 1, 1
	res, err := Train(context.Background(), cfg, toySet(4), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := append(toySet(4), ex("x", filter.Helpful, "fever falls with aspirin", "what reduces fever?"),
		ex("y", filter.NotHelpful, "aspirin is a drug", "what reduces fever?"))
	opt := CalibrateOptions{EvalOptions: EvalOptions{Windowing: filter.Windowing{MaxSeqLength: 128, DocStride: 16}, Backend: testBackend}}
	out := filepath.Join(t.TempDir(), "calibrated")
	rep, err := Calibrate(res.LastCheckpoint, out, data, opt)
	if err != nil {
		t.Fatal(err)
	}
	if rep.N != 6 || rep.Helpful != 3 || len(rep.Weights) != 4 || rep.ROCAUCModel == nil || rep.ROCAUCCalibrated == nil {
		t.Fatalf("report %+v", rep)
	}
	pc := opt.withDefaults().predictor()
	raw, err := loadForEval(testBackend, res.LastCheckpoint, pc, "")
	if err != nil {
		t.Fatal(err)
	}
	cal, err := loadForEval(testBackend, out, pc, "")
	if err != nil {
		t.Fatal(err)
	}
	if raw.Calibration != nil || cal.Calibration == nil || cal.Calibration.DocFreq.Docs != 4 {
		t.Fatalf("calibrations: trained %v, calibrated %+v (want doc_freq over the 4 distinct evidences)", raw.Calibration, cal.Calibration)
	}
	instr := []string{data[4].Question, data[5].Question}
	p0, _, err := raw.Predict(context.Background(), instr, nil)
	if err != nil {
		t.Fatal(err)
	}
	p1, _, err := cal.Predict(context.Background(), instr, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range instr {
		x, _ := cal.Calibration.FeatureValues(p0[i], instr[i])
		if want := filter.Sigmoid(filter.Logit(rep.Weights, x)); math.Abs(p1[i]-want) > 1e-12 {
			t.Errorf("instruction %d: calibrated P %v, want σ(w·x) = %v (T5 %v, features %v)", i, p1[i], want, p0[i], x)
		}
	}
	lb, err := loadForTraining(testBackend, out, 1, -1, nil, pc)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := lb.Model.Config.Extra(filter.CalibrationKey); ok || lb.Calibration != nil {
		t.Error("training from a calibrated checkpoint keeps its calibration")
	}
	if c, _ := t5.LoadConfig(out); c.ModelType != "t5" {
		t.Errorf("calibrated config.json model_type %q", c.ModelType)
	}

	for _, tc := range []struct {
		name string
		data []filter.Example
		opt  CalibrateOptions
		out  string
		want string
	}{
		{"one class", toySet(1), opt, filepath.Join(t.TempDir(), "a"), "both classes are needed"},
		{"out exists", data, opt, out, "already exists"},
		{"features out of order", data, CalibrateOptions{EvalOptions: opt.EvalOptions, Features: []string{filter.FeatureLevelSum, filter.FeatureLogOdds}},
			filepath.Join(t.TempDir(), "b"), "want each once in the order"},
		{"negative penalty", data, CalibrateOptions{EvalOptions: opt.EvalOptions, L2: -1}, filepath.Join(t.TempDir(), "c"), "L2 penalty -1"},
	} {
		if _, err := Calibrate(res.LastCheckpoint, tc.out, tc.data, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
