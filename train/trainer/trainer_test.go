package trainer

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/models/backend"
)

func TestLinearSchedule(t *testing.T) {
	// HF get_linear_schedule_with_warmup(num_warmup_steps=2, num_training_steps=6), lr 1.
	for _, c := range []struct {
		step, warmup, total int
		want                float64
	}{
		{0, 2, 6, 0}, {1, 2, 6, 0.5}, {2, 2, 6, 1}, {3, 2, 6, 0.75}, {5, 2, 6, 0.25}, {6, 2, 6, 0}, {9, 2, 6, 0},
		{0, 0, 4, 1}, {1, 0, 4, 0.75}, {4, 0, 4, 0},
	} {
		if got := LinearSchedule(c.step, c.warmup, c.total, 1); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("LinearSchedule(%d, %d, %d) = %v, want %v", c.step, c.warmup, c.total, got, c.want)
		}
	}
	c := Config{WarmupRatio: 0.1, TotalSteps: 15}
	if c.Warmup() != 2 { // ceil(1.5)
		t.Errorf("Warmup() = %d, want 2", c.Warmup())
	}
}

func TestDefaultNoDecay(t *testing.T) {
	for path, want := range map[string]bool{
		"/encoder/block/0/layer/0/layer_norm/weight":      true,
		"/encoder/final_layer_norm/weight":                true,
		"/embeddings/LayerNorm/weight":                    true,
		"/encoder/layer/0/attention/self/query/bias":      true,
		"/encoder/block/0/layer/0/SelfAttention/q/weight": false,
		"/shared/weight":                                  false,
	} {
		if got := DefaultNoDecay(path); got != want {
			t.Errorf("DefaultNoDecay(%q) = %v, want %v", path, got, want)
		}
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
