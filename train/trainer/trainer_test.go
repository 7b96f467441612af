package trainer

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/models/backend"
)

// Hand values of HF's schedules (lr_lambda × peak 1): warmup 2, total 6.
func TestSchedules(t *testing.T) {
	c := math.Cos
	for _, tc := range []struct {
		name                string
		step, warmup, total int
		want                float64
	}{
		{SchedulerLinear, 0, 2, 6, 0}, {SchedulerLinear, 1, 2, 6, 0.5}, {SchedulerLinear, 2, 2, 6, 1},
		{SchedulerLinear, 3, 2, 6, 0.75}, {SchedulerLinear, 5, 2, 6, 0.25}, {SchedulerLinear, 6, 2, 6, 0},
		{SchedulerLinear, 9, 2, 6, 0}, {SchedulerLinear, 0, 0, 4, 1}, {SchedulerLinear, 1, 0, 4, 0.75},
		{SchedulerLinear, 4, 0, 4, 0},
		// get_cosine_schedule_with_warmup: ½(1 + cos(π·(s−W)/(T−W))).
		{SchedulerCosine, 0, 2, 6, 0}, {SchedulerCosine, 1, 2, 6, 0.5}, {SchedulerCosine, 2, 2, 6, 1},
		{SchedulerCosine, 3, 2, 6, 0.5 * (1 + c(math.Pi/4))}, {SchedulerCosine, 4, 2, 6, 0.5},
		{SchedulerCosine, 5, 2, 6, 0.5 * (1 + c(3*math.Pi/4))}, {SchedulerCosine, 6, 2, 6, 0},
		{SchedulerCosine, 0, 0, 4, 1}, {SchedulerCosine, 2, 0, 4, 0.5}, {SchedulerCosine, 4, 0, 4, 0},
		// Past the end the cosine of num_cycles 0.5 rises again; max(0, ·) only clips negatives.
		{SchedulerCosine, 5, 0, 4, 0.5 * (1 + c(5*math.Pi/4))},
		// get_constant_schedule_with_warmup.
		{SchedulerConstant, 0, 2, 6, 0}, {SchedulerConstant, 1, 2, 6, 0.5}, {SchedulerConstant, 2, 2, 6, 1},
		{SchedulerConstant, 6, 2, 6, 1}, {SchedulerConstant, 0, 0, 4, 1}, {SchedulerConstant, 9, 0, 4, 1},
	} {
		if got := Schedule(tc.name, tc.step, tc.warmup, tc.total, 1); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Schedule(%s, %d, %d, %d) = %v, want %v", tc.name, tc.step, tc.warmup, tc.total, got, tc.want)
		}
	}
	if got := Schedule(SchedulerCosine, 3, 2, 6, 1e-3); math.Abs(got-0.8535533905932737e-3) > 1e-15 {
		t.Errorf("cosine at step 3 of 6, warmup 2, peak 1e-3 = %v, want 8.535533905932737e-4", got)
	}
	c2 := Config{WarmupRatio: 0.1, TotalSteps: 15}
	if c2.Warmup() != 2 { // ceil(1.5)
		t.Errorf("Warmup() = %d, want 2", c2.Warmup())
	}
}

func TestDefaultNoDecay(t *testing.T) {
	for path, want := range map[string]bool{
		"/encoder/block/0/layer/0/layer_norm/weight": true,
		"/encoder/final_layer_norm/weight":           true,
		"/embeddings/LayerNorm/weight":               true,
		"/embeddings/LayerNorm/bias":                 true,
		"/encoder/layer/0/attention/self/query/bias": true,
		// HF's substring rule: "bias" is in the name (a last-component rule decays it).
		"/encoder/block/0/layer/0/SelfAttention/relative_attention_bias/weight": true,
		"/decoder/block/0/layer/0/SelfAttention/relative_attention_bias/weight": true,
		"/encoder/block/0/layer/0/SelfAttention/q/weight":                       false,
		"/encoder/block/0/layer/1/DenseReluDense/wi_0/weight":                   false,
		"/shared/weight":                                   false,
		"/lm_head/weight":                                  false,
		"/embeddings/word_embeddings/weight":               false,
		"/encoder/layer/0/attention/output/dense/weight":   false,
		"/encoder/layer/0/attention/output/LayerNorm/bias": true,
	} {
		if got := DefaultNoDecay(path); got != want {
			t.Errorf("DefaultNoDecay(%q) = %v, want %v", path, got, want)
		}
	}
	if HFName("/encoder/final_layer_norm/weight") != "encoder.final_layer_norm.weight" {
		t.Errorf("HFName = %q", HFName("/encoder/final_layer_norm/weight"))
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.TotalSteps = 1
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*Config){
		"LearningRate":     func(c *Config) { c.LearningRate = 0 },
		"TotalSteps":       func(c *Config) { c.TotalSteps = 0 },
		"Beta2":            func(c *Config) { c.Beta2 = 1 },
		"GradAccumulation": func(c *Config) { c.GradAccumulation = 0 },
		"MaxGradNorm":      func(c *Config) { c.MaxGradNorm = -1 },
		"Scheduler":        func(c *Config) { c.Scheduler = "cosine_with_restarts" },
	} {
		c := ok
		edit(&c)
		if err := c.Validate(); err == nil || !contains(err.Error(), name) {
			t.Errorf("%s: error %v does not name the field", name, err)
		}
	}
}

func contains(s, sub string) bool {
	return len(s) >= len(sub) && (s == sub || len(sub) == 0 || indexOf(s, sub) >= 0)
}
func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// Toy model: pred_b = x_b·w + c, loss = mean_b (pred_b − y_b)², with w under
// /lin (decayed) and c under /layer_norm (exempt).
type toy struct {
	ctx *context.Context
}

func newToy(t *testing.T) *toy {
	ctx := context.New()
	ctx.In("lin").VariableWithValue("weight", []float32{0.5, -0.3, 0.2})
	ctx.In("layer_norm").VariableWithValue("weight", []float32{0.1})
	return &toy{ctx}
}

func toyLoss(ctx *context.Context, in []*graph.Node) *graph.Node {
	g := in[0].Graph()
	w := ctx.In("lin").GetVariable("weight").ValueGraph(g)
	c := ctx.In("layer_norm").GetVariable("weight").ValueGraph(g)
	pred := graph.Add(graph.Einsum("bi,i->b", in[0], w), c)
	d := graph.Sub(pred, in[1])
	return graph.ReduceAllMean(graph.Square(d))
}

type batch struct {
	x [][]float64
	y []float64
}

func (b batch) tensors() []*tensors.Tensor {
	var flat []float32
	y := make([]float32, len(b.y))
	for i, r := range b.x {
		for _, v := range r {
			flat = append(flat, float32(v))
		}
		y[i] = float32(b.y[i])
	}
	return []*tensors.Tensor{tensors.FromFlatDataAndDimensions(flat, len(b.x), 3), tensors.FromValue(y)}
}

// refAdamW replays the algorithm in float64 on the host (torch.optim.AdamW,
// clip_grad_norm_, mean-of-micro-batch accumulation, linear schedule).
func refAdamW(cfg Config, p []float64, groups [][]batch) []float64 {
	m := make([]float64, 4)
	v := make([]float64, 4)
	p = append([]float64(nil), p...)
	for s, grp := range groups {
		g := make([]float64, 4)
		for _, b := range grp {
			for i, x := range b.x {
				pred := x[0]*p[0] + x[1]*p[1] + x[2]*p[2] + p[3]
				d := 2 * (pred - b.y[i]) / float64(len(b.x)) / float64(len(grp))
				for j := range 3 {
					g[j] += d * x[j]
				}
				g[3] += d
			}
		}
		norm := 0.0
		for _, x := range g {
			norm += x * x
		}
		norm = math.Sqrt(norm)
		if cfg.MaxGradNorm > 0 {
			coef := math.Min(1, cfg.MaxGradNorm/(norm+1e-6))
			for j := range g {
				g[j] *= coef
			}
		}
		lr := LinearSchedule(s, cfg.Warmup(), cfg.TotalSteps, cfg.LearningRate)
		st := float64(s + 1)
		bc1, bc2 := 1-math.Pow(cfg.Beta1, st), 1-math.Pow(cfg.Beta2, st)
		for j := range p {
			if j < 3 {
				p[j] *= 1 - lr*cfg.WeightDecay
			}
			m[j] = cfg.Beta1*m[j] + (1-cfg.Beta1)*g[j]
			v[j] = cfg.Beta2*v[j] + (1-cfg.Beta2)*g[j]*g[j]
			p[j] -= lr / bc1 * m[j] / (math.Sqrt(v[j])/math.Sqrt(bc2) + cfg.Epsilon)
		}
	}
	return p
}

func toyGroups() [][]batch {
	a := batch{[][]float64{{1, 2, 0}, {0, 1, -1}}, []float64{1, -2}}
	b := batch{[][]float64{{3, 0, 1}, {1, 1, 1}}, []float64{0.5, 2}}
	c := batch{[][]float64{{-1, 0, 2}, {2, 2, 0}}, []float64{-1, 1}}
	return [][]batch{{a, b}, {c}, {b, c, a}, {a}}
}

func params(t *testing.T, ctx *context.Context) []float64 {
	t.Helper()
	var out []float64
	for _, s := range []string{"lin", "layer_norm"} {
		v, err := ctx.In(s).GetVariable("weight").Value()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range tensors.MustCopyFlatData[float32](v) {
			out = append(out, float64(x))
		}
	}
	return out
}

func toyConfig() Config {
	cfg := DefaultConfig()
	cfg.LearningRate, cfg.WeightDecay, cfg.MaxGradNorm = 0.05, 0.1, 0.5
	cfg.WarmupSteps, cfg.TotalSteps = 1, 5
	return cfg
}

func runToy(t *testing.T, tr *Trainer, groups [][]batch) {
	t.Helper()
	for _, grp := range groups {
		var micro [][]*tensors.Tensor
		for _, b := range grp {
			micro = append(micro, b.tensors())
		}
		if _, err := tr.Step(micro); err != nil {
			t.Fatal(err)
		}
	}
}

// Four updates (groups of 2, 1, 3 and 1 micro-batches, warmup, decay with an
// exempt parameter, clipping active) match the float64 host replay.
func TestStepMatchesReference(t *testing.T) {
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	toy := newToy(t)
	cfg := toyConfig()
	tr, err := New(be, toy.ctx, toyLoss, cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := params(t, toy.ctx)
	runToy(t, tr, toyGroups())
	got := params(t, toy.ctx)
	want := refAdamW(cfg, start, toyGroups())
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-5 {
			t.Errorf("param %d = %.7f, reference %.7f", i, got[i], want[i])
		}
	}
	if tr.GlobalStep() != 4 {
		t.Errorf("GlobalStep = %d, want 4", tr.GlobalStep())
	}
	// The parameters moved (the test can fail): at least one changed by > 1e-3.
	moved := false
	for i := range start {
		moved = moved || math.Abs(got[i]-start[i]) > 1e-3
	}
	if !moved {
		t.Error("parameters did not move")
	}
}

// Saving after two updates and resuming in a fresh context reproduces the
// uninterrupted run.
func TestSaveLoadStateResume(t *testing.T) {
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	groups := toyGroups()
	full := newToy(t)
	trFull, _ := New(be, full.ctx, toyLoss, toyConfig())
	runToy(t, trFull, groups)

	first := newToy(t)
	tr1, _ := New(be, first.ctx, toyLoss, toyConfig())
	runToy(t, tr1, groups[:2])
	path := filepath.Join(t.TempDir(), OptimizerFile)
	if err := tr1.SaveState(path); err != nil {
		t.Fatal(err)
	}
	p := params(t, first.ctx)

	second := newToy(t)
	second.ctx.In("lin").GetVariable("weight").MustSetValue(tensors.FromValue([]float32{float32(p[0]), float32(p[1]), float32(p[2])}))
	second.ctx.In("layer_norm").GetVariable("weight").MustSetValue(tensors.FromValue([]float32{float32(p[3])}))
	tr2, _ := New(be, second.ctx, toyLoss, toyConfig())
	if err := tr2.LoadState(path); err != nil {
		t.Fatal(err)
	}
	if tr2.GlobalStep() != 2 {
		t.Fatalf("restored GlobalStep = %d, want 2", tr2.GlobalStep())
	}
	runToy(t, tr2, groups[2:])
	a, b := params(t, full.ctx), params(t, second.ctx)
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-6 {
			t.Errorf("param %d: resumed %.7f, uninterrupted %.7f", i, b[i], a[i])
		}
	}
}

func TestWriteCheckpointAtomic(t *testing.T) {
	out := t.TempDir()
	// A leftover temporary directory from a killed write is not a checkpoint.
	if err := os.MkdirAll(filepath.Join(out, ".checkpoint-9.tmp-123"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, step := range []int{2, 10} {
		_, err := WriteCheckpoint(out, step, func(dir string) error {
			return WriteState(dir, State{GlobalStep: step})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// A failing fill leaves nothing behind.
	if _, err := WriteCheckpoint(out, 12, func(dir string) error { return os.ErrInvalid }); err == nil {
		t.Fatal("failing fill: no error")
	}
	cks, err := Checkpoints(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(cks) != 2 || filepath.Base(cks[0]) != "checkpoint-2" || filepath.Base(cks[1]) != "checkpoint-10" {
		t.Fatalf("checkpoints %v, want checkpoint-2, checkpoint-10 (numeric order)", cks)
	}
	if _, err := os.Stat(filepath.Join(out, "checkpoint-12")); !os.IsNotExist(err) {
		t.Errorf("failed write left checkpoint-12: %v", err)
	}
	s, err := ReadState(cks[1])
	if err != nil || s.GlobalStep != 10 {
		t.Fatalf("ReadState = %+v, %v", s, err)
	}
	if err := SetBest(out, "checkpoint-2"); err != nil {
		t.Fatal(err)
	}
	if err := SetBest(out, "checkpoint-10"); err != nil {
		t.Fatal(err)
	}
	if s, err := ReadState(filepath.Join(out, BestLink)); err != nil || s.GlobalStep != 10 {
		t.Fatalf("best → %+v, %v; want step 10", s, err)
	}
}

// d/dx Σ rsqrt(x) = −½·x^-3/2: at x = 4 → −1/16, at x = 0.25 → −4.
func TestRsqrtGradient(t *testing.T) {
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	e, err := graph.NewExec(be, func(x *graph.Node) *graph.Node {
		return graph.Gradient(graph.ReduceAllSum(graph.Rsqrt(x)), x)[0]
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Exec(tensors.FromValue([]float32{4, 0.25}))
	if err != nil {
		t.Fatal(err)
	}
	got := tensors.MustCopyFlatData[float32](out[0])
	for i, want := range []float32{-1.0 / 16, -4} {
		if math.Abs(float64(got[i]-want)) > 1e-6 {
			t.Errorf("grad[%d] = %v, want %v", i, got[i], want)
		}
	}
}

// snapshot returns the bytes of every variable of ctx (parameters, moments,
// accumulators, RNG), by path.
func snapshot(t *testing.T, ctx *context.Context) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for v := range ctx.IterVariables() {
		if !v.HasValue() {
			continue
		}
		val, err := v.Value()
		if err != nil {
			t.Fatal(err)
		}
		if err := val.ConstBytes(func(b []byte) { out[v.Scope()+"/"+v.Name()] = append([]byte(nil), b...) }); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// An update with an infinite loss (y = +Inf), alone or in any micro-batch of
// an accumulation group, leaves every parameter and every AdamW moment bit
// for bit as it was: an error by default, a counted skip with SkipNonFinite.
// The next finite update then matches a run that never saw the bad one.
func TestNonFiniteStepLeavesStateUntouched(t *testing.T) {
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	inf := batch{[][]float64{{1, 2, 0}, {0, 1, -1}}, []float64{math.Inf(1), -2}}
	groups := toyGroups()
	for _, tc := range []struct {
		name string
		bad  []batch
	}{
		{"single", []batch{inf}},
		{"first of two", []batch{inf, groups[0][1]}},
		{"last of three", []batch{groups[2][0], groups[2][1], inf}},
	} {
		for _, skip := range []bool{false, true} {
			toy := newToy(t)
			cfg := toyConfig()
			cfg.SkipNonFinite = skip
			tr, err := New(be, toy.ctx, toyLoss, cfg)
			if err != nil {
				t.Fatal(err)
			}
			runToy(t, tr, groups[:2])
			before := snapshot(t, toy.ctx)
			var micro [][]*tensors.Tensor
			for _, b := range tc.bad {
				micro = append(micro, b.tensors())
			}
			res, err := tr.Step(micro)
			if skip {
				if err != nil || !res.Skipped || tr.SkippedNonFinite() != 1 {
					t.Fatalf("%s, skip: result %+v, err %v, skipped %d; want a counted skip", tc.name, res, err, tr.SkippedNonFinite())
				}
			} else if !errors.Is(err, ErrNonFinite) {
				t.Fatalf("%s: err %v, want ErrNonFinite", tc.name, err)
			}
			if tr.GlobalStep() != 2 {
				t.Errorf("%s: GlobalStep %d after a non-finite update, want 2", tc.name, tr.GlobalStep())
			}
			after := snapshot(t, toy.ctx)
			for path, b := range before {
				if strings.HasPrefix(path, StateScope+"/acc") || path == "/"+context.RNGStateVariableName {
					continue // scratch space and the dropout stream may move
				}
				if !bytes.Equal(b, after[path]) {
					t.Errorf("%s (skip %v): %s changed", tc.name, skip, path)
				}
			}
			runToy(t, tr, groups[2:])
			got, want := params(t, toy.ctx), refAdamW(toyConfig(), params(t, newToy(t).ctx), groups)
			for i := range want {
				if math.Abs(got[i]-want[i]) > 1e-5 {
					t.Errorf("%s (skip %v): param %d after resuming = %.7f, reference without the bad update %.7f", tc.name, skip, i, got[i], want[i])
				}
			}
		}
	}
}

// Gradients returns the accumulated, unclipped gradient and changes nothing.
func TestGradients(t *testing.T) {
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	toy := newToy(t)
	tr, err := New(be, toy.ctx, toyLoss, toyConfig())
	if err != nil {
		t.Fatal(err)
	}
	grp := toyGroups()[0]
	p := params(t, toy.ctx)
	want := make([]float64, 4)
	for _, b := range grp {
		for i, x := range b.x {
			pred := x[0]*p[0] + x[1]*p[1] + x[2]*p[2] + p[3]
			d := 2 * (pred - b.y[i]) / float64(len(b.x)) / float64(len(grp))
			for j := range 3 {
				want[j] += d * x[j]
			}
			want[3] += d
		}
	}
	before := snapshot(t, toy.ctx)
	grads, res, err := tr.Gradients([][]*tensors.Tensor{grp[0].tensors(), grp[1].tensors()})
	if err != nil {
		t.Fatal(err)
	}
	got := append(tensors.MustCopyFlatData[float32](grads["/lin/weight"]), tensors.MustCopyFlatData[float32](grads["/layer_norm/weight"])...)
	norm := 0.0
	for i := range want {
		norm += want[i] * want[i]
		if math.Abs(float64(got[i])-want[i]) > 1e-5 {
			t.Errorf("gradient %d = %v, want %v", i, got[i], want[i])
		}
	}
	if math.Abs(res.GradNorm-math.Sqrt(norm)) > 1e-5 || tr.GlobalStep() != 0 {
		t.Errorf("grad norm %v (want %v), step %d (want 0)", res.GradNorm, math.Sqrt(norm), tr.GlobalStep())
	}
	for path, b := range before {
		if !strings.HasPrefix(path, StateScope+"/acc") && !bytes.Equal(b, snapshot(t, toy.ctx)[path]) {
			t.Errorf("Gradients changed %s", path)
		}
	}
}
