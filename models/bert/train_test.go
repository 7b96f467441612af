package bert

import (
	"syscall"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/losses"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"
	"github.com/ragforge/ragforge/internal/catch"
)

func tinyTrainModel(t *testing.T, dropout float64) *Model {
	t.Helper()
	cfg := TinyConfig(50)
	cfg.HiddenSize, cfg.NumAttentionHeads, cfg.IntermediateSize, cfg.NumHiddenLayers = 32, 2, 64, 1
	cfg.MaxPositionEmbeddings, cfg.NumLabels = 16, 1
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = dropout, dropout
	m, err := NewRandom(testBackend(t), cfg, true, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Gradients of Σ_b logits[b,0] with respect to the classifier are known by
// hand: ∂/∂bias = B and ∂/∂W[0,j] = Σ_b pooler[b,j].
func TestClassifierGradientByHand(t *testing.T) {
	m := tinyTrainModel(t, 0)
	ids := [][]int{{2, 7, 9, 3}, {2, 11, 3}}
	out, err := m.Forward(ids, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, err := m.pad(ids, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := context.NewExec(m.Backend, m.Ctx, func(ctx *context.Context, ids, mask *graph.Node) []*graph.Node {
		logits := m.ClassifierGraph(ctx, m.EncoderGraph(ctx, ids, mask, nil))
		loss := graph.ReduceAllSum(logits) // batch 2 is its own bucket: no padded rows
		if logits.Shape().Dimensions[0] != 2 {
			panic("padded batch")
		}
		g := ids.Graph()
		w := ctx.In("classifier").GetVariable("weight").ValueGraph(g)
		b := ctx.In("classifier").GetVariable("bias").ValueGraph(g)
		return graph.Gradient(loss, w, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := catch.Exec(e, in.ids, in.mask)
	if err != nil {
		t.Fatal(err)
	}
	h := m.Config.HiddenSize
	wantW := make([]float32, h)
	for j := range wantW {
		wantW[j] = out.Pooler[j] + out.Pooler[h+j]
	}
	allClose(t, "dL/dW", tensors.MustCopyFlatData[float32](res[0]), wantW, 1e-5, 1e-5)
	allClose(t, "dL/db", tensors.MustCopyFlatData[float32](res[1]), []float32{2}, 1e-6, 0)
}

// The graph functions train with pkg/ml/train: a few AdamW steps on
// EncoderGraph→ClassifierGraph (dropout on) reduce the inference MSE, and
// the Score executor sees the updated variables.
func TestTrainerSmoke(t *testing.T) {
	m := tinyTrainModel(t, 0.1)
	ids := [][]int{{2, 7, 9, 3}, {2, 11, 3}, {2, 5, 3}, {2, 8, 8, 8, 3}}
	targets := []float32{1, -1, 1, -1}
	mse := func() float64 {
		s, err := m.Score(ids, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var l float64
		for i := range s {
			d := float64(s[i] - targets[i])
			l += d * d
		}
		return l / float64(len(s))
	}
	before := mse()
	in, err := m.pad(ids, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	modelFn := func(ctx *context.Context, _ any, inputs []*graph.Node) []*graph.Node {
		logits := m.ClassifierGraph(ctx, m.EncoderGraph(ctx, inputs[0], inputs[1], nil))
		return []*graph.Node{logits} // batch 4 is its own bucket: no padded rows
	}
	trainer := train.NewTrainer(m.Backend, m.Ctx, modelFn, losses.MeanSquaredError,
		optimizers.Adam().LearningRate(3e-3).WeightDecay(0.01).Done(), nil, nil)
	labels := tensors.FromFlatDataAndDimensions(targets, len(ids), 1)
	for step := 0; step < 30; step++ {
		if _, err := trainer.TrainStep(nil, []*tensors.Tensor{in.ids, in.mask}, []*tensors.Tensor{labels}); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	after := mse()
	t.Logf("MSE before %.4f after %.4f", before, after)
	if !(after < before/2) {
		t.Fatalf("MSE %.4f → %.4f after 30 AdamW steps, want at least halved", before, after)
	}
	// Save writes the trained variables (optimizer state is left out).
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	m2, err := Load(m.Backend, dir)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := m.Score(ids, nil, nil)
	got, err := m2.Score(ids, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	allClose(t, "reloaded trained score", got, want, 0, 0)
}

// BenchmarkTrainStep times one AdamW update of BERT-Tiny (hidden 128, 2
// layers, 2 heads, dropout on) on a CLS-pooled, L2-normalised embedding
// loss over 32 sequences of 128 tokens: the retriever shape of the demo's
// self-learning round. Compile time (the first step) is excluded.
func BenchmarkTrainStep(b *testing.B) {
	cfg := TinyConfig(1500)
	m, err := NewRandom(testBackend(b), cfg, false, 1)
	if err != nil {
		b.Fatal(err)
	}
	const batch, length = 32, 128
	ids := make([]int32, batch*length)
	mask := make([]int32, batch*length)
	for i := range ids {
		ids[i], mask[i] = int32(2+(i*7919)%(cfg.VocabSize-2)), 1
	}
	idsT := tensors.FromFlatDataAndDimensions(ids, batch, length)
	maskT := tensors.FromFlatDataAndDimensions(mask, batch, length)
	modelFn := func(ctx *context.Context, _ any, inputs []*graph.Node) []*graph.Node {
		return []*graph.Node{PoolGraph(m.EncoderGraph(ctx, inputs[0], inputs[1], nil), inputs[1], PoolCLS, true)}
	}
	trainer := train.NewTrainer(m.Backend, m.Ctx, modelFn, losses.MeanSquaredError,
		optimizers.Adam().LearningRate(1e-5).WeightDecay(0.01).Done(), nil, nil)
	labels := tensors.FromShape(shapes.Make(dtypes.Float32, batch, cfg.HiddenSize))
	step := func() {
		if _, err := trainer.TrainStep(nil, []*tensors.Tensor{idsT, maskT}, []*tensors.Tensor{labels}); err != nil {
			b.Fatal(err)
		}
	}
	step()
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		step()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/step")
	// CPU time (user + system) per step: steadier than wall time on a
	// shared machine.
	b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/step")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
