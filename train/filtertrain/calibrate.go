package filtertrain

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/t5"
)

// CalibrateOptions configures Calibrate. Windows, batch and backend are
// EvalOptions'; Progress counts the windows scored.
type CalibrateOptions struct {
	EvalOptions
	// Features to combine (filter.CalibrationFeatures' names, in that
	// order); nil: all of them.
	Features []string
	// IDFEvidences are the texts coverage's document frequencies are
	// counted over (e.g. the corpus chunks of the filter's ICT examples);
	// nil: the examples' own evidences.
	IDFEvidences []string
	// L2 is the penalty ½·L2·‖w‖² on the feature weights (not the
	// intercept); 0 means 1, sklearn LogisticRegression's C = 1.
	L2 float64
}

// CalibrationReport is what Calibrate fitted and how it ranks the examples
// it was fitted on (in-sample ROC-AUC: a check, not a held-out figure).
type CalibrationReport struct {
	Model, Out       string
	N, Helpful       int
	Features         []string
	Weights          []float64
	Iterations       int      // Newton steps to convergence
	ROCAUCModel      *float64 `json:",omitempty"` // the T5's own P([HELPFUL]); nil without log_odds
	ROCAUCCalibrated *float64 `json:",omitempty"`
}

// Calibrate fits a Calibration of the filter checkpoint modelDir to
// labeled examples it was not trained on (logistic regression by Newton's
// method on the features of filter.Calibration, each example's T5
// probability its windows' aggregate as in Evaluate) and writes the
// checkpoint with it in config.json (filter.CalibrationKey) to outDir, as
// Export does. A calibration modelDir already carries is ignored in the fit
// and replaced. Errors: no examples or one class only, outDir exists, a
// non-RAG² instruction (naming its id), a fit that does not converge.
func Calibrate(modelDir, outDir string, examples []filter.Example, opt CalibrateOptions) (*CalibrationReport, error) {
	if len(examples) == 0 {
		return nil, fmt.Errorf("calibrate %s: %w", modelDir, filter.ErrEmpty)
	}
	opt.EvalOptions = opt.withDefaults()
	cal := filter.DefaultCalibration()
	if opt.Features != nil {
		cal.Features = opt.Features
	}
	if err := filter.CheckCalibrationFeatures(cal.Features); err != nil {
		return nil, fmt.Errorf("calibrate %s: %w", modelDir, err)
	}
	if opt.L2 == 0 {
		opt.L2 = 1
	}
	if !(opt.L2 > 0) || math.IsInf(opt.L2, 0) {
		return nil, fmt.Errorf("calibrate %s: L2 penalty %v, want > 0", modelDir, opt.L2)
	}
	p, err := loadForEval(opt.Backend, modelDir, opt.predictor(), nn.Auto)
	if err != nil {
		return nil, err
	}
	p.Calibration = nil
	instr, gold := make([]string, len(examples)), make([]bool, len(examples))
	evidence := opt.IDFEvidences
	helpful := 0
	for i, ex := range examples {
		instr[i], gold[i] = ex.Question, ex.Answer == filter.Helpful
		if gold[i] {
			helpful++
		}
		if opt.IDFEvidences == nil {
			ev, _, err := filter.ParseInstruction(strings.TrimSpace(ex.Question))
			if err != nil {
				return nil, fmt.Errorf("calibrate %s: example %q: %w", modelDir, ex.ID, err)
			}
			evidence = append(evidence, ev)
		}
	}
	if helpful == 0 || helpful == len(examples) {
		return nil, fmt.Errorf("calibrate %s: %d examples, %d of them %s: both classes are needed", modelDir, len(examples), helpful, filter.Helpful)
	}
	if slices.Contains(cal.Features, filter.FeatureCoverage) {
		cal.DocFreq = cal.CountDocFreq(evidence)
	}
	// Without log_odds the T5 is not read: its scores would be discarded.
	probs := make([]float64, len(instr))
	usesModel := slices.Contains(cal.Features, filter.FeatureLogOdds)
	if usesModel {
		score := func(ctx context.Context, rows [][]int) ([]float64, error) {
			return p.ScoreRows(ctx, rows, opt.Progress)
		}
		if probs, _, err = p.Predict(context.Background(), instr, score); err != nil {
			return nil, fmt.Errorf("calibrate %s: %w", modelDir, err)
		}
	}
	x := make([][]float64, len(examples))
	for i := range examples {
		if x[i], err = cal.FeatureValues(probs[i], instr[i]); err != nil {
			return nil, fmt.Errorf("calibrate %s: example %q: %w", modelDir, examples[i].ID, err)
		}
	}
	w, iters, err := FitLogistic(x, gold, opt.L2)
	if err != nil {
		return nil, fmt.Errorf("calibrate %s: %w", modelDir, err)
	}
	cal.Weights = w
	if err := cal.Check(); err != nil {
		return nil, fmt.Errorf("calibrate %s: %w", modelDir, err)
	}
	fused := make([]float64, len(x))
	for i := range x {
		fused[i] = filter.Logit(w, x[i])
	}
	rep := &CalibrationReport{Model: modelDir, Out: outDir, N: len(examples), Helpful: helpful, Features: cal.Features, Weights: w, Iterations: iters}
	if auc, ok := ROCAUC(gold, probs); ok && usesModel {
		rep.ROCAUCModel = &auc
	}
	if auc, ok := ROCAUC(gold, fused); ok {
		rep.ROCAUCCalibrated = &auc
	}
	// The calibration holds for the windows it was fitted at: recorded beside it.
	win := filter.Windowing{MaxSeqLength: opt.MaxSeqLength, DocStride: opt.DocStride}
	err = exportWith(modelDir, outDir, func(c *t5.Config) error {
		if err := c.SetExtra(filter.WindowsKey, win); err != nil {
			return err
		}
		return c.SetExtra(filter.CalibrationKey, cal)
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// FitLogistic fits P(y) = σ(w[0] + Σ w[j+1]·x[j]) to rows x and labels y by
// Newton's method (iteratively reweighted least squares) on the
// objective Σ log-loss + ½·l2·‖w[1:]‖², the intercept unpenalized as in
// sklearn's LogisticRegression (l2 = 1/C). It returns the weights and the
// steps taken; it stops when no weight moves by more than 1e-10. Errors: no
// rows, rows of unequal length, non-finite values, a singular Hessian, no
// convergence in 100 steps.
func FitLogistic(x [][]float64, y []bool, l2 float64) ([]float64, int, error) {
	if len(x) == 0 || len(x) != len(y) {
		return nil, 0, fmt.Errorf("logistic fit: %d rows, %d labels", len(x), len(y))
	}
	d := len(x[0]) + 1
	for i, r := range x {
		if len(r) != d-1 {
			return nil, 0, fmt.Errorf("logistic fit: row %d has %d features, row 1 has %d", i+1, len(r), d-1)
		}
		for _, v := range r {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, 0, fmt.Errorf("logistic fit: row %d holds %v", i+1, v)
			}
		}
	}
	w := make([]float64, d)
	for it := 1; it <= 100; it++ {
		g := make([]float64, d)
		h := make([][]float64, d)
		for j := range h {
			h[j] = make([]float64, d+1)
		}
		z := make([]float64, d)
		for i, r := range x {
			z[0] = 1
			copy(z[1:], r)
			s := filter.Sigmoid(filter.Logit(w, r))
			t := 0.0
			if y[i] {
				t = 1
			}
			for a := range d {
				g[a] += (s - t) * z[a]
				for b := range d {
					h[a][b] += s * (1 - s) * z[a] * z[b]
				}
			}
		}
		for a := 1; a < d; a++ {
			g[a] += l2 * w[a]
			h[a][a] += l2
		}
		for a := range d {
			h[a][d] = g[a]
		}
		step, err := solve(h)
		if err != nil {
			return nil, it, fmt.Errorf("logistic fit: step %d: %w", it, err)
		}
		moved := 0.0
		for a := range d {
			w[a] -= step[a]
			moved = max(moved, math.Abs(step[a]))
		}
		if math.IsNaN(moved) {
			return nil, it, fmt.Errorf("logistic fit: step %d is not finite", it)
		}
		if moved <= 1e-10 {
			return w, it, nil
		}
	}
	return nil, 100, fmt.Errorf("logistic fit: no convergence in 100 Newton steps")
}

// solve returns the solution of the augmented system a (n rows of n + 1)
// by Gaussian elimination with partial pivoting; a is overwritten.
func solve(a [][]float64) ([]float64, error) {
	n := len(a)
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		if math.Abs(a[p][c]) < 1e-12 {
			return nil, fmt.Errorf("singular Hessian (column %d)", c)
		}
		a[c], a[p] = a[p], a[c]
		for r := c + 1; r < n; r++ {
			f := a[r][c] / a[c][c]
			for k := c; k <= n; k++ {
				a[r][k] -= f * a[c][k]
			}
		}
	}
	x := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		s := a[r][n]
		for k := r + 1; k < n; k++ {
			s -= a[r][k] * x[k]
		}
		x[r] = s / a[r][r]
	}
	return x, nil
}
