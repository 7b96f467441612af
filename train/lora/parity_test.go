package lora

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/safetensors"
	"github.com/ragforge/ragforge/models/testutil/trainfix"
	"github.com/ragforge/ragforge/train/trainer"
)

// loraFixture is train-qwen2-lora with its base model and an adapter folder
// holding the fixture's initial LoRA weights (init.safetensors).
type loraFixture struct {
	fx               *trainfix.Fixture
	dir, base, init0 string
	lora             decoder.LoRA
	examples         []Example
}

func openLoRAFixture(t *testing.T) loraFixture {
	t.Helper()
	dir := testutil.SharedPath(t, "fixtures/train-qwen2-lora")
	f := loraFixture{fx: trainfix.Load(t, dir), dir: dir, base: testutil.SharedPath(t, "fixtures/qwen2-tiny"), init0: t.TempDir()}
	if err := hf.CopyFile(filepath.Join(dir, decoder.AdapterConfigFile), filepath.Join(f.init0, decoder.AdapterConfigFile)); err != nil {
		t.Fatal(err)
	}
	if err := hf.CopyFile(filepath.Join(dir, "init.safetensors"), filepath.Join(f.init0, decoder.AdapterWeightsFile)); err != nil {
		t.Fatal(err)
	}
	f.lora, _ = NormalizeLoRA(decoder.LoRA{R: 8, Alpha: 16, TargetModules: []string{AllLinear}})
	f.examples = fixtureExamples(t, f.fx)
	return f
}

// fixtureOptions are the fixture's run: AdamW lr 2e-3, cosine with 2 warmup
// updates over 8, clipping at 1, one batch of both examples per update.
func (f loraFixture) options(out string) Options {
	c := DefaultConfig()
	c.LoRA, c.LearningRate, c.WarmupSteps, c.Epochs, c.BatchSize, c.MaxGradNorm = f.lora, 2e-3, 2, 8, 2, 1
	return Options{Config: c, ModelDir: f.base, OutputDir: out, Backend: "go", Merge: true, BaseModelName: "qwen2-tiny", InitAdapter: f.init0}
}

// TestParityTrainQwen2LoRA runs the fixture's 8 updates through Train and
// compares loss, learning rate and gradient norm per update, the final LoRA
// weights (PEFT keys), the merged layer-0 weights, the exported
// adapter_config.json and the loss after the last update.
func TestParityTrainQwen2LoRA(t *testing.T) {
	f := openLoRAFixture(t)
	out := t.TempDir()
	res, err := Train(context.Background(), f.options(out), f.examples, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var per struct{ Loss, LR, GradNorm []float64 }
	var raw struct {
		Loss     []float64 `json:"loss"`
		LR       []float64 `json:"lr"`
		GradNorm []float64 `json:"grad_norm"`
	}
	if err := json.Unmarshal(f.fx.JSON["per_step"], &raw); err != nil {
		t.Fatal(err)
	}
	per.Loss, per.LR, per.GradNorm = raw.Loss, raw.LR, raw.GradNorm
	if len(res.History) != 8 {
		t.Fatalf("%d updates, want 8", len(res.History))
	}
	worst := map[string]float64{}
	for s, h := range res.History {
		for _, q := range []struct {
			what       string
			got, want  float64
			atol, rtol float64
		}{
			{"loss", h.Loss, per.Loss[s], 1e-5, 1e-5},
			{"lr", h.LearningRate, per.LR[s], 0, 1e-6},
			{"grad_norm", h.GradNorm, per.GradNorm[s], 1e-6, 1e-4},
		} {
			d := math.Abs(q.got - q.want)
			if !(d <= q.atol+q.rtol*math.Abs(q.want)) {
				t.Errorf("update %d: %s = %.9g, want %.9g", s+1, q.what, q.got, q.want)
			}
			worst[q.what] = math.Max(worst[q.what], d)
		}
	}
	// Final LoRA weights: the exported adapter against final.<PEFT key>.
	got, err := safetensors.ReadFile(filepath.Join(res.AdapterDir, decoder.AdapterWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	want := f.fx.Params("final")
	if names := got.Names(); !slices.Equal(names, want) {
		t.Fatalf("adapter keys %v, want %v", names, want)
	}
	for _, k := range want {
		g, _ := got.Tensors[k].Float32()
		w, shape := f.fx.Float32(t, "final."+k)
		if !slices.Equal(got.Tensors[k].Shape, shape) {
			t.Errorf("%s: shape %v, want %v", k, got.Tensors[k].Shape, shape)
		}
		worst["final"] = math.Max(worst["final"], trainfix.CheckClose(t, "final."+k, g, w, 1e-5, 1e-4))
	}
	// The adapter folder equals the fixture's, keys peft 0.15 adds aside.
	cfg := readJSON(t, filepath.Join(res.AdapterDir, decoder.AdapterConfigFile))
	for k := range peft015Only {
		delete(cfg, k)
	}
	if wantCfg := readJSON(t, filepath.Join(f.dir, decoder.AdapterConfigFile)); !reflect.DeepEqual(cfg, wantCfg) {
		t.Errorf("adapter_config.json %v, want %v", cfg, wantCfg)
	}
	// Merged checkpoint: layer 0's seven modules, and it loads as a decoder.
	merged, err := safetensors.LoadDir(res.MergedDir)
	if err != nil {
		t.Fatal(err)
	}
	mk := f.fx.Params("merged")
	if len(mk) != 7 {
		t.Fatalf("fixture has %d merged tensors, want 7", len(mk))
	}
	for _, k := range mk {
		tt, ok := merged[k]
		if !ok {
			t.Errorf("merged checkpoint lacks %s", k)
			continue
		}
		g, _ := tt.Float32()
		w, _ := f.fx.Float32(t, "merged."+k)
		worst["merged"] = math.Max(worst["merged"], trainfix.CheckClose(t, "merged."+k, g, w, 1e-5, 1e-4))
	}
	// Loss after update 8, with the exported adapter on the base model and
	// with the merged checkpoint (the same function).
	wantFinal := f.fx.JSON["final_loss_after_step_8"]
	var fl float64
	if err := json.Unmarshal(wantFinal, &fl); err != nil {
		t.Fatal(err)
	}
	for _, src := range []struct{ model, adapter string }{{f.base, res.AdapterDir}, {res.MergedDir, ""}} {
		l := batchLoss(t, src.model, src.adapter, f.examples)
		if math.Abs(l-fl) > 1e-5+1e-5*fl {
			t.Errorf("loss after update 8 (model %s, adapter %q) = %.9g, want %.9g", filepath.Base(src.model), src.adapter, l, fl)
		}
		worst["final_loss"] = math.Max(worst["final_loss"], math.Abs(l-fl))
	}
	t.Logf("max |got − want|: %v", worst)
	if res.TrainableParams != 2*(8*(64+64)+8*(64+32)*2+8*(64+64)+8*(64+160)*2+8*(160+64)) {
		t.Errorf("trainable parameters %d, want the 14 modules' A and B only", res.TrainableParams)
	}
}

// batchLoss is the SFT loss of examples under the model at dir (with the
// adapter folder when not "").
func batchLoss(t *testing.T, dir, adapter string, examples []Example) float64 {
	t.Helper()
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	m, err := decoder.Load(be, dir)
	if err != nil {
		t.Fatal(err)
	}
	if adapter != "" {
		if err := m.LoadAdapter(adapter); err != nil {
			t.Fatal(err)
		}
	}
	in := NewBatch(examples, len(examples), 0).Inputs(1)
	e, err := mlctx.NewExec(be, m.Ctx, func(ctx *mlctx.Context, ids, mask, pos, labels *graph.Node) *graph.Node {
		return m.LossGraph(ctx, ids, mask, pos, labels)
	})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := e.Exec(in[0], in[1], in[2], in[3])
	if err != nil {
		t.Fatal(err)
	}
	return float64(tensors.ToScalar[float32](outs[0]))
}

// TestParityGradInit compares the gradients at the fixture's init with
// grad_init.<PEFT key> (every lora_A gradient is exactly 0: B = 0), and
// checks that the trainer holds AdamW moments for the LoRA weights alone.
func TestParityGradInit(t *testing.T) {
	f := openLoRAFixture(t)
	m, err := loadModel("go", f.base, f.lora, 0, f.init0)
	if err != nil {
		t.Fatal(err)
	}
	tcfg := trainer.DefaultConfig()
	tcfg.LearningRate, tcfg.TotalSteps, tcfg.WarmupSteps, tcfg.Scheduler, tcfg.MaxGradNorm = 2e-3, 8, 2, trainer.SchedulerCosine, 1
	tr, err := trainer.New(m.Backend, m.Ctx, lossFn(m), tcfg)
	if err != nil {
		t.Fatal(err)
	}
	micro := [][]*tensors.Tensor{NewBatch(f.examples, 2, 0).Inputs(1)}
	grads, sr, err := tr.Gradients(micro)
	if err != nil {
		t.Fatal(err)
	}
	keys := f.fx.Params("grad_init")
	if len(grads) != len(keys) {
		t.Errorf("%d gradients, want %d (LoRA weights only)", len(grads), len(keys))
	}
	for _, k := range keys {
		name := strings.TrimPrefix(k, decoder.PEFTPrefix)
		g, ok := grads["/"+strings.ReplaceAll(name, ".", "/")]
		if !ok {
			t.Errorf("no gradient for %s", k)
			continue
		}
		w, _ := f.fx.Float32(t, "grad_init."+k)
		gv := tensors.MustCopyFlatData[float32](g)
		if strings.HasSuffix(k, "lora_A.weight") {
			for i, x := range gv {
				if x != 0 {
					t.Errorf("%s[%d] = %g, want exactly 0 (B = 0 at init)", k, i, x)
					break
				}
			}
		}
		trainfix.CheckClose(t, "grad_init."+k, gv, w, 1e-6, 1e-4)
	}
	var per struct {
		GradNorm []float64 `json:"grad_norm"`
	}
	if err := json.Unmarshal(f.fx.JSON["per_step"], &per); err != nil {
		t.Fatal(err)
	}
	if d := math.Abs(sr.GradNorm - per.GradNorm[0]); d > 1e-6+1e-4*per.GradNorm[0] {
		t.Errorf("grad norm at init %.9g, want %.9g", sr.GradNorm, per.GradNorm[0])
	}
	// One update, then: moments exist for the 28 LoRA tensors and nothing else.
	if _, err := tr.Step(micro); err != nil {
		t.Fatal(err)
	}
	moments := 0
	for v := range m.Ctx.IterVariables() {
		if strings.HasPrefix(v.Scope(), trainer.StateScope+"/m") {
			moments++
			if !strings.Contains(v.Scope(), "/lora_") {
				t.Errorf("optimizer state for a frozen weight: %s/%s", v.Scope(), v.Name())
			}
		}
	}
	if moments != len(keys) {
		t.Errorf("%d first moments, want %d", moments, len(keys))
	}
}

// TestResumeEqualsUninterrupted stops a run after 3 of 8 updates
// (checkpoint every update), resumes it and compares the final adapter
// with an uninterrupted run's, bit for bit: from the fixture's init, and
// from a fresh init with LoRA dropout (the dropout stream is restored too).
func TestResumeEqualsUninterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("two 8-update runs per case")
	}
	f := openLoRAFixture(t)
	for _, tc := range []struct {
		name    string
		dropout float64
		init    bool
	}{{"fixture init", 0, true}, {"fresh init, dropout 0.1", 0.1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			o := f.options("")
			o.Merge, o.SaveSteps, o.LoRA.Dropout = false, 1, tc.dropout
			if !tc.init {
				o.InitAdapter = ""
			}
			full, part := t.TempDir(), t.TempDir()
			o.OutputDir = full
			if _, err := Train(context.Background(), o, f.examples, nil, nil); err != nil {
				t.Fatal(err)
			}
			o.OutputDir = part
			ctx, cancel := context.WithCancel(context.Background())
			_, err := Train(ctx, o, f.examples, nil, func(p Progress) {
				if p.Phase == "checkpoint" && p.Step == 3 {
					cancel()
				}
			})
			if err == nil || !strings.Contains(err.Error(), "stopped at step 3") {
				t.Fatalf("interrupted run: error %v, want one stopping at step 3", err)
			}
			if _, err := Train(context.Background(), o, f.examples, nil, nil); err == nil || !strings.Contains(err.Error(), "already holds checkpoints") {
				t.Fatalf("rerun without resume: error %v, want a refusal", err)
			}
			o.Resume = true
			res, err := Train(context.Background(), o, f.examples, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(res.ResumedFrom, "checkpoint-3") || res.GlobalStep != 8 {
				t.Fatalf("resumed from %q to step %d, want checkpoint-3 to 8", res.ResumedFrom, res.GlobalStep)
			}
			a, err := os.ReadFile(filepath.Join(full, AdapterDir, decoder.AdapterWeightsFile))
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(part, AdapterDir, decoder.AdapterWeightsFile))
			if err != nil {
				t.Fatal(err)
			}
			if string(a) != string(b) {
				t.Fatal("resumed run's adapter differs from the uninterrupted run's")
			}
			// Other settings are refused on resume.
			o.LearningRate = 1e-3
			if _, err := Train(context.Background(), o, f.examples, nil, nil); err == nil || !strings.Contains(err.Error(), "settings differ") {
				t.Fatalf("resume with another lr: error %v, want a refusal", err)
			}
		})
	}
}

// Dropout on the LoRA input changes the trajectory (it is applied while
// training), and the same seed gives the same adapter.
func TestLoRADropoutSeeded(t *testing.T) {
	f := openLoRAFixture(t)
	adapter := func(dropout float64, seed int64) string {
		o := f.options(t.TempDir())
		o.Merge, o.InitAdapter, o.LoRA.Dropout, o.Seed, o.Epochs = false, "", dropout, seed, 3
		res, err := Train(context.Background(), o, f.examples, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(res.AdapterDir, decoder.AdapterWeightsFile))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	a, b, c := adapter(0.3, 5), adapter(0.3, 5), adapter(0, 5)
	if a != b {
		t.Error("same seed, different adapters")
	}
	if a == c {
		t.Error("dropout 0.3 gave the adapter of dropout 0")
	}
}

// Accumulating 2 micro-batches of 1 example equals one batch of 2 (the
// fixture's run), as with transformers' Trainer: the update's loss is the
// token mean over both (5 and 3 scored tokens here, so a mean of the two
// micro-batch means would differ).
func TestGradAccumulationEqualsBatch(t *testing.T) {
	f := openLoRAFixture(t)
	runWith := func(batch, accum int) *Result {
		o := f.options(t.TempDir())
		o.BatchSize, o.GradAccumulation, o.Merge = batch, accum, false
		res, err := Train(context.Background(), o, f.examples, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	one, acc := runWith(2, 1), runWith(1, 2)
	if len(one.History) != 8 || len(acc.History) != 8 {
		t.Fatalf("%d and %d updates, want 8", len(one.History), len(acc.History))
	}
	for s := range one.History {
		a, b := one.History[s], acc.History[s]
		if math.Abs(a.Loss-b.Loss) > 1e-6 || math.Abs(a.GradNorm-b.GradNorm) > 1e-6*a.GradNorm+1e-7 {
			t.Errorf("update %d: batch 2 loss %.9g grad norm %.9g; accumulated %.9g, %.9g", s+1, a.Loss, a.GradNorm, b.Loss, b.GradNorm)
		}
	}
	x, err := safetensors.ReadFile(filepath.Join(one.AdapterDir, decoder.AdapterWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	y, err := safetensors.ReadFile(filepath.Join(acc.AdapterDir, decoder.AdapterWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range x.Names() {
		a, _ := x.Tensors[k].Float32()
		b, _ := y.Tensors[k].Float32()
		trainfix.CheckClose(t, k, b, a, 1e-6, 1e-4)
	}
}

func TestMicroWeights(t *testing.T) {
	got := MicroWeights([]Batch{{ScoredTokens: 5}, {ScoredTokens: 3}})
	if want := []float32{1.25, 0.75}; !slices.Equal(got, want) {
		t.Errorf("weights %v, want %v", got, want)
	}
	if got := MicroWeights([]Batch{{ScoredTokens: 4}}); !slices.Equal(got, []float32{1}) {
		t.Errorf("one micro-batch: %v, want [1]", got)
	}
	if got := MicroWeights([]Batch{{}, {}}); !slices.Equal(got, []float32{0, 0}) {
		t.Errorf("no scored token: %v, want zeros", got)
	}
}
