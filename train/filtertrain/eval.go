package filtertrain

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/nn"
)

// RAG² evaluation file names (classifier/run_classifier.py).
const (
	PredFile     = "dict_id_pred_results.json"
	ResultsFile  = "final_eval_results.json"
	PerClassFile = "final_eval_results_perClass.json"
)

// EvalOptions configures Evaluate; zero fields take DefaultConfig's values
// (MaxSeqLength 512, DocStride 128, Aggregate max, batch 16) and Threshold 0.5.
type EvalOptions struct {
	filter.Windowing
	BatchSize int
	Threshold float64 // predict [HELPFUL] when P(helpful) ≥ Threshold
	Backend   string
	DType     nn.DType              // dtype the weights are held in ("" = nn.Auto: as stored)
	Progress  func(done, total int) // windows scored
}

func (o EvalOptions) withDefaults() EvalOptions {
	d := DefaultConfig()
	if o.MaxSeqLength == 0 {
		o.MaxSeqLength = d.MaxSeqLength
	}
	if o.DocStride == 0 {
		o.DocStride = d.DocStride
	}
	if o.BatchSize == 0 {
		o.BatchSize = d.EvalBatchSize
	}
	if o.Aggregate == "" {
		o.Aggregate = d.Aggregate
	}
	if o.Threshold == 0 {
		o.Threshold = 0.5
	}
	return o
}

// Prediction is one example's outcome.
type Prediction struct {
	ID          string  `json:"id"`
	DatasetName string  `json:"dataset_name"`
	Answer      string  `json:"answer"`     // gold label
	Prediction  string  `json:"prediction"` // predicted label
	PHelpful    float64 `json:"p_helpful"`  // aggregated P([HELPFUL])
	Windows     int     `json:"windows"`
}

// ThresholdPoint is one row of the threshold sweep.
type ThresholdPoint struct {
	Threshold float64 `json:"threshold"`
	Accuracy  float64 `json:"accuracy"`
	Precision float64 `json:"precision"`
	Recall    float64 `json:"recall"`
	F1        float64 `json:"f1"`
}

// Confusion counts with [HELPFUL] as the positive class.
type Confusion struct {
	TP int `json:"tp"`
	FP int `json:"fp"`
	TN int `json:"tn"`
	FN int `json:"fn"`
}

// Accuracy is (TP+TN)/N (0 when N = 0).
func (c Confusion) Accuracy() float64 { return ratio(c.TP+c.TN, c.TP+c.TN+c.FP+c.FN) }

// Precision is TP/(TP+FP), 0 when nothing is predicted positive (sklearn zero_division=0).
func (c Confusion) Precision() float64 { return ratio(c.TP, c.TP+c.FP) }

// Recall is TP/(TP+FN), 0 without positives.
func (c Confusion) Recall() float64 { return ratio(c.TP, c.TP+c.FN) }

// F1 is the harmonic mean of precision and recall (0 when both are 0).
func (c Confusion) F1() float64 {
	p, r := c.Precision(), c.Recall()
	if p+r == 0 {
		return 0
	}
	return 2 * p * r / (p + r)
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Confuse counts predictions p ≥ threshold against gold (true = [HELPFUL]).
func Confuse(gold []bool, p []float64, threshold float64) Confusion {
	var c Confusion
	for i, g := range gold {
		pos := p[i] >= threshold
		switch {
		case g && pos:
			c.TP++
		case g:
			c.FN++
		case pos:
			c.FP++
		default:
			c.TN++
		}
	}
	return c
}

// ROCAUC is the area under the ROC curve of scores for gold positives,
// computed as the Mann–Whitney U statistic with average ranks for ties
// (equal to sklearn.metrics.roc_auc_score). ok is false when either class is
// absent (AUC undefined).
func ROCAUC(gold []bool, scores []float64) (auc float64, ok bool) {
	n := len(scores)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return scores[idx[a]] < scores[idx[b]] })
	rank := make([]float64, n)
	for i := 0; i < n; {
		j := i
		for j+1 < n && scores[idx[j+1]] == scores[idx[i]] {
			j++
		}
		r := float64(i+j)/2 + 1 // average 1-based rank of the tie block
		for k := i; k <= j; k++ {
			rank[idx[k]] = r
		}
		i = j + 1
	}
	var pos, neg int
	var sumPos float64
	for i, g := range gold {
		if g {
			pos++
			sumPos += rank[i]
		} else {
			neg++
		}
	}
	if pos == 0 || neg == 0 {
		return 0, false
	}
	return (sumPos - float64(pos*(pos+1))/2) / float64(pos*neg), true
}

// EvalReport is the evaluation of a filter on labelled examples. Rates are
// fractions in [0, 1]; the RAG² files hold percentages as RAG² does.
type EvalReport struct {
	Model     string    `json:"model"`
	N         int       `json:"n"`
	Windows   int       `json:"windows"`
	Aggregate string    `json:"aggregate"`
	Threshold float64   `json:"threshold"`
	Confusion Confusion `json:"confusion"`
	Accuracy  float64   `json:"accuracy"`
	// PerClass is the accuracy within each gold class (recall of that class),
	// keyed by label string, as RAG²'s calculate_accuracy_perClass.
	PerClass  map[string]float64 `json:"per_class"`
	Precision float64            `json:"precision"` // of [HELPFUL]
	Recall    float64            `json:"recall"`
	F1        float64            `json:"f1"`
	ROCAUC    *float64           `json:"roc_auc"` // nil when one class is absent
	// Sweep holds thresholds 0.05, 0.10, …, 0.95.
	Sweep []ThresholdPoint `json:"threshold_sweep"`
	// MajorityClass is the more frequent gold label ([HELPFUL] on a tie) and
	// MajorityBaseline the accuracy of always predicting it.
	MajorityClass    string       `json:"majority_class"`
	MajorityBaseline float64      `json:"majority_baseline"`
	Predictions      []Prediction `json:"predictions"`
}

// Report computes an EvalReport from per-example probabilities.
func Report(examples []filter.Example, p []float64, windows []int, threshold float64) *EvalReport {
	gold := make([]bool, len(examples))
	npos := 0
	r := &EvalReport{N: len(examples), Threshold: threshold}
	for i, ex := range examples {
		gold[i] = ex.Answer == filter.Helpful
		if gold[i] {
			npos++
		}
		pred := filter.LabelOf(p[i], threshold)
		w := 0
		if windows != nil {
			w = windows[i]
			r.Windows += w
		}
		r.Predictions = append(r.Predictions, Prediction{ID: ex.ID, DatasetName: ex.DatasetName, Answer: ex.Answer, Prediction: pred, PHelpful: p[i], Windows: w})
	}
	c := Confuse(gold, p, threshold)
	r.Confusion, r.Accuracy = c, c.Accuracy()
	r.Precision, r.Recall, r.F1 = c.Precision(), c.Recall(), c.F1()
	r.PerClass = map[string]float64{filter.Helpful: ratio(c.TP, c.TP+c.FN), filter.NotHelpful: ratio(c.TN, c.TN+c.FP)}
	if auc, ok := ROCAUC(gold, p); ok {
		r.ROCAUC = &auc
	}
	for k := 1; k <= 19; k++ {
		t := float64(k) / 20
		cc := Confuse(gold, p, t)
		r.Sweep = append(r.Sweep, ThresholdPoint{t, cc.Accuracy(), cc.Precision(), cc.Recall(), cc.F1()})
	}
	r.MajorityClass, r.MajorityBaseline = filter.Helpful, ratio(npos, len(examples))
	if len(examples)-npos > npos {
		r.MajorityClass, r.MajorityBaseline = filter.NotHelpful, ratio(len(examples)-npos, len(examples))
	}
	return r
}

// Evaluate scores examples with the filter checkpoint in modelDir (HF T5
// layout with the two label tokens in its tokenizer): each example is cut
// into windows (Windows), P(helpful) of a window is the softmax over the
// [HELPFUL]/[NOT_HELPFUL] logits at the first decoder step, windows are
// aggregated per example (opt.Aggregate) and the example is [HELPFUL] when
// P ≥ opt.Threshold. Errors: no examples, a checkpoint without the label
// tokens (naming the directory and token), load or compute failures.
func Evaluate(modelDir string, examples []filter.Example, opt EvalOptions) (*EvalReport, error) {
	if len(examples) == 0 {
		return nil, fmt.Errorf("evaluate %s: %w", modelDir, filter.ErrEmpty)
	}
	opt = opt.withDefaults()
	if err := opt.Windowing.Check(); err != nil {
		return nil, fmt.Errorf("evaluate %s: %w", modelDir, err)
	}
	p, err := loadForEval(opt.Backend, modelDir, opt.predictor(), opt.DType)
	if err != nil {
		return nil, err
	}
	r, err := evaluate(p, examples, opt.Threshold, opt.Progress)
	if err != nil {
		return nil, fmt.Errorf("evaluate %s: %w", modelDir, err)
	}
	r.Model = modelDir
	return r, nil
}

// predictor is the models/filter configuration of o (after withDefaults).
func (o EvalOptions) predictor() filter.Config {
	return filter.Config{Windowing: o.Windowing, BatchSize: o.BatchSize}
}

// evaluate scores examples with p (windows, ScoreRows reporting progress,
// aggregation by p.Config.Aggregate) and reports at threshold. It runs to
// the end once started, as a checkpoint's validation must.
func evaluate(p *filter.Predictor, examples []filter.Example, threshold float64, progress func(done, total int)) (*EvalReport, error) {
	instr := make([]string, len(examples))
	for i, ex := range examples {
		instr[i] = ex.Question
	}
	score := func(ctx context.Context, rows [][]int) ([]float64, error) { return p.ScoreRows(ctx, rows, progress) }
	probs, count, err := p.Predict(context.Background(), instr, score)
	if err != nil {
		return nil, err
	}
	r := Report(examples, probs, count, threshold)
	r.Aggregate = p.Config.Aggregate
	return r, nil
}

// WriteRAG2Files writes RAG²'s three evaluation files into dir (created if
// needed; each file written atomically):
//   - dict_id_pred_results.json: {id: {"prediction", "answer", "dataset_name"}}
//     as RAG², plus "p_helpful";
//   - final_eval_results.json: {"final_acc_score": accuracy in percent} as
//     RAG², plus our metrics (fractions) under their EvalReport names;
//   - final_eval_results_perClass.json: {"[HELPFUL]": %, "[NOT_HELPFUL]": %}.
func (r *EvalReport) WriteRAG2Files(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write RAG² files: %w", err)
	}
	preds := map[string]any{}
	for _, p := range r.Predictions {
		preds[p.ID] = map[string]any{"prediction": p.Prediction, "answer": p.Answer, "dataset_name": p.DatasetName, "p_helpful": p.PHelpful}
	}
	results := map[string]any{
		"final_acc_score": 100 * r.Accuracy, "accuracy": r.Accuracy, "precision": r.Precision, "recall": r.Recall,
		"f1": r.F1, "roc_auc": r.ROCAUC, "n": r.N, "threshold": r.Threshold, "aggregate": r.Aggregate,
		"majority_class": r.MajorityClass, "majority_baseline": r.MajorityBaseline, "confusion": r.Confusion,
		"threshold_sweep": r.Sweep,
	}
	perClass := map[string]float64{}
	for k, v := range r.PerClass {
		perClass[k] = 100 * v
	}
	for name, v := range map[string]any{PredFile: preds, ResultsFile: results, PerClassFile: perClass} {
		if err := hf.WriteJSON(filepath.Join(dir, name), v); err != nil {
			return fmt.Errorf("write RAG² files: %w", err)
		}
	}
	return nil
}

// Metrics returns the report's scalar metrics keyed for a run store
// (eval/accuracy, eval/f1, …); roc_auc only when defined.
func (r *EvalReport) Metrics(prefix string) map[string]float64 {
	m := map[string]float64{
		prefix + "accuracy": r.Accuracy, prefix + "precision": r.Precision, prefix + "recall": r.Recall, prefix + "f1": r.F1,
		prefix + "accuracy_helpful": r.PerClass[filter.Helpful], prefix + "accuracy_not_helpful": r.PerClass[filter.NotHelpful],
		prefix + "majority_baseline": r.MajorityBaseline,
	}
	if r.ROCAUC != nil && !math.IsNaN(*r.ROCAUC) {
		m[prefix+"roc_auc"] = *r.ROCAUC
	}
	return m
}

// EvaluateEnsemble is Evaluate for the mean of several filters: each
// checkpoint of modelDirs scores every example (windows aggregated as
// opt.Aggregate), the ensemble's P(helpful) of an example is the mean of
// the members' (soft voting, as sklearn's VotingClassifier(voting="soft")
// with equal weights), and the report is made from those means. One
// directory is Evaluate exactly. Report.Model lists the members, comma
// separated; windows are the first member's (all share the settings).
// Errors: no directory, and Evaluate's, naming the member.
func EvaluateEnsemble(modelDirs []string, examples []filter.Example, opt EvalOptions) (*EvalReport, error) {
	if len(modelDirs) == 0 {
		return nil, fmt.Errorf("evaluate: no filter checkpoint")
	}
	var members [][]float64
	var first *EvalReport
	for _, dir := range modelDirs {
		r, err := Evaluate(dir, examples, opt)
		if err != nil {
			return nil, err
		}
		if first == nil {
			first = r
		}
		p := make([]float64, len(r.Predictions))
		for i, pr := range r.Predictions {
			p[i] = pr.PHelpful
		}
		members = append(members, p)
	}
	if len(modelDirs) == 1 {
		return first, nil
	}
	windows := make([]int, len(first.Predictions))
	for i, pr := range first.Predictions {
		windows[i] = pr.Windows
	}
	r := Report(examples, MeanProbs(members), windows, opt.withDefaults().Threshold)
	r.Aggregate, r.Model = first.Aggregate, strings.Join(modelDirs, ",")
	return r, nil
}

// MeanProbs returns the element-wise mean of equal-length probability
// vectors (members[m][i]: member m's P(helpful) of example i); nil for no
// member. A length mismatch panics (the members scored the same examples).
func MeanProbs(members [][]float64) []float64 {
	if len(members) == 0 {
		return nil
	}
	out := make([]float64, len(members[0]))
	for _, p := range members {
		if len(p) != len(out) {
			panic(fmt.Sprintf("filter: MeanProbs: member of %d examples, want %d", len(p), len(out)))
		}
		for i, v := range p {
			out[i] += v
		}
	}
	for i := range out {
		out[i] /= float64(len(members))
	}
	return out
}
