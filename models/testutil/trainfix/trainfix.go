// Package trainfix reads the training-step reference fixtures
// (../shared/fixtures/train-t5-filter, train-bert-infonce; their README,
// section 8) and checks a trainer's per-update scalars, initial gradients
// and weight snapshots against them with the tolerances the README states.
// Tests only: the trainers themselves come from train/filtertrain and
// train/retriever.
package trainfix

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/safetensors"
)

// Case is one entry of expected.json → cases.
type Case struct {
	PeakLR           float64   `json:"peak_lr"`
	WeightDecay      float64   `json:"weight_decay"`
	WarmupSteps      int       `json:"warmup_steps"`
	MaxGradNorm      float64   `json:"max_grad_norm"`
	TotalSteps       int       `json:"total_steps"`
	GradAccumulation int       `json:"gradient_accumulation_steps"`
	RecordedSteps    []int     `json:"recorded_steps"`
	LRPerStep        []float64 `json:"lr_per_step"`
	LRSumAfterStep   []float64 `json:"lr_sum_after_step"`
	LossPerStep      []float64 `json:"loss_per_step"`
	GradNormPerStep  []float64 `json:"grad_norm_per_step"`
	MicroBatches     [][]int   `json:"micro_batches"`
	Pooling          string    `json:"pooling"`
	// WeightCheckGradient names the stored initial gradient ("grad_init",
	// "case_d.grad_init") that classifies elements as tight or loose.
	WeightCheckGradient string `json:"weight_check_gradient"`
}

// Fixture is one training fixture directory.
type Fixture struct {
	Dir   string
	File  *safetensors.File
	Cases map[string]Case
	JSON  map[string]json.RawMessage // the whole expected.json
}

// Load reads dir/expected.safetensors and dir/expected.json (Cases empty
// when it has no "cases").
func Load(t testing.TB, dir string) *Fixture {
	t.Helper()
	f, err := safetensors.ReadFile(filepath.Join(dir, "expected.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	fx := &Fixture{Dir: dir, File: f}
	if err := json.Unmarshal(b, &fx.JSON); err != nil {
		t.Fatalf("%s/expected.json: %v", dir, err)
	}
	// train-qwen2-lora has one run and no cases.
	if raw, ok := fx.JSON["cases"]; ok {
		if err := json.Unmarshal(raw, &fx.Cases); err != nil {
			t.Fatalf("%s/expected.json: field %q: %v", dir, "cases", err)
		}
	}
	return fx
}

// CaseNames returns the case names in order ("a", "b", …).
func (fx *Fixture) CaseNames() []string {
	var out []string
	for c := range fx.Cases {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Float32 returns a stored float tensor and its shape.
func (fx *Fixture) Float32(t testing.TB, name string) ([]float32, []int) {
	t.Helper()
	tt, ok := fx.File.Tensors[name]
	if !ok {
		t.Fatalf("%s: tensor %q missing", fx.Dir, name)
	}
	v, err := tt.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return v, tt.Shape
}

// Int64 returns a stored integer tensor and its shape.
func (fx *Fixture) Int64(t testing.TB, name string) ([]int64, []int) {
	t.Helper()
	tt, ok := fx.File.Tensors[name]
	if !ok {
		t.Fatalf("%s: tensor %q missing", fx.Dir, name)
	}
	v, err := tt.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return v, tt.Shape
}

// Int32 is Int64 converted to int32 (ragforge's id tensors).
func (fx *Fixture) Int32(t testing.TB, name string) ([]int32, []int) {
	v, shape := fx.Int64(t, name)
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out, shape
}

// Params returns the HF parameter names stored under prefix+"." (sorted).
func (fx *Fixture) Params(prefix string) []string {
	var out []string
	for _, n := range fx.File.Names() {
		if p, ok := strings.CutPrefix(n, prefix+"."); ok {
			out = append(out, p)
		}
	}
	return out
}

// Getter returns the float32 values and shape of an HF parameter (weights
// or gradients) of the model under test; ok false when it has none.
type Getter func(hfName string) (v []float32, shape []int, ok bool)

// rowsOf gathers the stored rows (rows.<param>) of a full tensor.
func (fx *Fixture) rowsOf(t testing.TB, param string, v []float32, shape []int) []float32 {
	t.Helper()
	if _, ok := fx.File.Tensors["rows."+param]; !ok {
		return v
	}
	rows, _ := fx.Int64(t, "rows."+param)
	cols := 1
	for _, d := range shape[1:] {
		cols *= d
	}
	out := make([]float32, 0, len(rows)*cols)
	for _, r := range rows {
		out = append(out, v[int(r)*cols:(int(r)+1)*cols]...)
	}
	return out
}

func maxAbs(v []float32) float64 {
	m := 0.0
	for _, x := range v {
		m = math.Max(m, math.Abs(float64(x)))
	}
	return m
}

// CheckScalars compares update s (1-based) of case c: loss (atol 1e-5, rtol
// 1e-5), gradient norm (rtol 5e-5) and learning rate (atol 1e-12, rtol 1e-6),
// against the float64 values of expected.json.
func (fx *Fixture) CheckScalars(t testing.TB, c string, s int, loss, gradNorm, lr float64) {
	t.Helper()
	cs := fx.Cases[c]
	for _, q := range []struct {
		what       string
		got, want  float64
		atol, rtol float64
	}{
		{"loss", loss, cs.LossPerStep[s-1], 1e-5, 1e-5},
		{"grad_norm", gradNorm, cs.GradNormPerStep[s-1], 0, 5e-5},
		{"lr", lr, cs.LRPerStep[s-1], 1e-12, 1e-6},
	} {
		if d := math.Abs(q.got - q.want); !(d <= q.atol+q.rtol*math.Abs(q.want)) {
			t.Errorf("case %s update %d: %s = %.9g, want %.9g (|Δ| %.3g > %.3g + %.3g·|want|)", c, s, q.what, q.got, q.want, d, q.atol, q.rtol)
		}
	}
}

// CheckGradients compares every stored gradient under prefix ("grad_init",
// "case_d.grad_init") with got: max|got − want| ≤ 1e-5·max|want| per tensor.
// zero lists parameters whose true gradient is exactly 0 (BERT's
// attention.self.key.bias): their max|got| must be ≤ 1e-5·(largest max|want|
// of any tensor). A parameter got has no gradient for must be stored as
// all zeros (unused by the loss, as BERT's pooler).
func (fx *Fixture) CheckGradients(t testing.TB, prefix string, got Getter, zero func(string) bool) {
	t.Helper()
	params := fx.Params(prefix)
	if len(params) == 0 {
		t.Fatalf("%s: no tensors %s.*", fx.Dir, prefix)
	}
	largest := 0.0
	for _, p := range params {
		w, _ := fx.Float32(t, prefix+"."+p)
		largest = math.Max(largest, maxAbs(w))
	}
	for _, p := range params {
		want, _ := fx.Float32(t, prefix+"."+p)
		g, shape, ok := got(p)
		if !ok {
			if maxAbs(want) != 0 {
				t.Errorf("%s.%s: the trainer computed no gradient, reference max|g| %.3g", prefix, p, maxAbs(want))
			}
			continue
		}
		g = fx.rowsOf(t, p, g, shape)
		if len(g) != len(want) {
			t.Errorf("%s.%s: %d elements, want %d", prefix, p, len(g), len(want))
			continue
		}
		if zero != nil && zero(p) {
			if m := maxAbs(g); m > 1e-5*largest {
				t.Errorf("%s.%s: true gradient is 0, max|got| %.3g > 1e-5·%.3g", prefix, p, m, largest)
			}
			continue
		}
		worst := 0.0
		for i := range want {
			worst = math.Max(worst, math.Abs(float64(g[i])-float64(want[i])))
		}
		if bound := 1e-5 * maxAbs(want); worst > bound {
			t.Errorf("%s.%s: max|got − want| %.3g > 1e-5·max|want| = %.3g (ratio %.3g)", prefix, p, worst, bound, worst/bound)
		}
	}
}

// CheckWeights compares the weights after update s of case c with
// case_<c>.step<s>.* by the README's element-wise bound (tight elements:
// 1e-6 + 5e-7·|want| + 1e-3·lr_sum; the others 0.1·lr_sum). exclude names
// parameters left out (BERT's attention.self.key.bias). It reports the
// largest ratio to the bound of each failing tensor.
func (fx *Fixture) CheckWeights(t testing.TB, c string, s int, got Getter, exclude func(string) bool) {
	t.Helper()
	cs := fx.Cases[c]
	prefix := fmt.Sprintf("case_%s.step%d", c, s)
	params := fx.Params(prefix)
	if len(params) == 0 {
		t.Fatalf("%s: no tensors %s.*", fx.Dir, prefix)
	}
	lrSum := cs.LRSumAfterStep[s-1]
	for _, p := range params {
		if exclude != nil && exclude(p) {
			continue
		}
		want, _ := fx.Float32(t, prefix+"."+p)
		g0, _ := fx.Float32(t, cs.WeightCheckGradient+"."+p)
		w, shape, ok := got(p)
		if !ok {
			t.Errorf("%s.%s: the model has no such parameter", prefix, p)
			continue
		}
		w = fx.rowsOf(t, p, w, shape)
		if len(w) != len(want) || len(g0) != len(want) {
			t.Errorf("%s.%s: %d elements (gradient %d), want %d", prefix, p, len(w), len(g0), len(want))
			continue
		}
		gmax := maxAbs(g0)
		worst, at := 0.0, -1
		for i := range want {
			k := 1e-3
			if a := math.Abs(float64(g0[i])); a < 1e-3*gmax && g0[i] != 0 {
				k = 0.1
			}
			bound := 1e-6 + 5e-7*math.Abs(float64(want[i])) + k*lrSum
			if r := math.Abs(float64(w[i])-float64(want[i])) / bound; r > worst {
				worst, at = r, i
			}
		}
		if worst > 1 {
			t.Errorf("%s.%s: element %d = %.9g, want %.9g: %.3g × the bound", prefix, p, at, w[at], want[at], worst)
		}
	}
}

// CheckClose compares got with want element-wise by the fixtures' rule
// |got − want| ≤ atol + rtol·|want| and reports the worst element of a
// failing tensor. It returns max|got − want| (NaN on a length mismatch).
func CheckClose(t testing.TB, what string, got, want []float32, atol, rtol float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d elements, want %d", what, len(got), len(want))
		return math.NaN()
	}
	worst, at, maxDiff := 0.0, -1, 0.0
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		maxDiff = math.Max(maxDiff, d)
		if r := d / (atol + rtol*math.Abs(float64(want[i]))); r > worst || math.IsNaN(d) {
			worst, at = r, i
		}
	}
	if at >= 0 && !(worst <= 1) {
		t.Errorf("%s: element %d = %.9g, want %.9g: %.3g × (atol %g + rtol %g·|want|)", what, at, got[at], want[at], worst, atol, rtol)
	}
	return maxDiff
}
