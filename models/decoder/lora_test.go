package decoder

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/safetensors"
)

// loraFixture loads a fresh qwen2-tiny (not the shared cached one: the
// adapter changes it) and the train-qwen2-lora expected tensors.
func loraFixture(t *testing.T) (*Model, string, map[string]*safetensors.Tensor) {
	t.Helper()
	base := testutil.SharedPath(t, "fixtures/qwen2-tiny")
	dir := testutil.SharedPath(t, "fixtures/train-qwen2-lora")
	m, err := Load(testBackend(t), base)
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.ReadFile(filepath.Join(dir, "expected.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	return m, dir, f.Tensors
}

func tensorFloats(t *testing.T, ts map[string]*safetensors.Tensor, name string) []float32 {
	t.Helper()
	x, ok := ts[name]
	if !ok {
		t.Fatalf("tensor %q missing", name)
	}
	v, err := x.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func tensorRows(t *testing.T, ts map[string]*safetensors.Tensor, name string) [][]int {
	fx := &fixture{expected: ts}
	return fx.ints(t, name)
}

// The adapter of train-qwen2-lora is its state after update 8, so the loss
// of the fixture's batch through the LoRA forward is outputs.final_loss; the
// base model alone gives steps.loss[0] (B = 0 at init).
func TestLoRAForwardLoss(t *testing.T) {
	m, dir, ts := loraFixture(t)
	ids, mask, labels := tensorRows(t, ts, "inputs.input_ids"), tensorRows(t, ts, "inputs.attention_mask"), tensorRows(t, ts, "inputs.labels")
	base, err := m.Loss(ids, mask, labels)
	if err != nil {
		t.Fatal(err)
	}
	allClose(t, "loss at init (base model)", []float32{base}, tensorFloats(t, ts, "steps.loss")[:1], 1e-5, 1e-5, nil)
	if err := m.LoadAdapter(dir); err != nil {
		t.Fatal(err)
	}
	if m.LoRA.Scaling() != 2 || len(m.LoRAVariableNames()) != 28 {
		t.Fatalf("adapter: scaling %g, %d LoRA variables; want 2 and 28 (14 modules)", m.LoRA.Scaling(), len(m.LoRAVariableNames()))
	}
	for v := range m.Ctx.IterVariables() {
		if lora := strings.Contains(v.Scope(), "lora_"); v.Trainable != lora {
			t.Fatalf("variable %s/%s trainable %v; want only LoRA variables trainable", v.Scope(), v.Name(), v.Trainable)
		}
	}
	got, err := m.Loss(ids, mask, labels)
	if err != nil {
		t.Fatal(err)
	}
	allClose(t, "final_loss (LoRA forward)", []float32{got}, tensorFloats(t, ts, "outputs.final_loss"), 1e-5, 1e-5, nil)
	before, err := m.Logits(ids, mask, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Merge(); err != nil {
		t.Fatal(err)
	}
	for _, mod := range m.Config.linearModules(0) {
		w, _, err := m.ParamValues(mod.name + ".weight")
		if err != nil {
			t.Fatal(err)
		}
		allClose(t, "Merge "+mod.name, w, tensorFloats(t, ts, "merged."+mod.name+".weight"), 1e-5, 1e-4, nil)
	}
	if m.LoRA != nil || len(m.LoRAVariableNames()) != 0 {
		t.Fatal("Merge left the adapter attached")
	}
	after, err := m.Logits(ids, mask, nil)
	if err != nil {
		t.Fatal(err)
	}
	allClose(t, "logits merged vs LoRA forward", flat(t, after), flat(t, before), logitsAtol, logitsRtol, nil)
}

// A LoRA on layer 0 only (targets named by full module path, suffix match)
// must give the forward of the base model with the fixture's merged.*
// weights in layer 0.
func TestLoRAForwardEqualsMergedWeights(t *testing.T) {
	m, dir, ts := loraFixture(t)
	adapter, err := safetensors.ReadFile(filepath.Join(dir, "adapter_model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	vals := map[string][]float32{}
	for _, mod := range m.Config.linearModules(0) {
		targets = append(targets, mod.name)
		for _, ab := range []string{".lora_A.weight", ".lora_B.weight"} {
			vals[mod.name+ab] = tensorFloats(t, adapter.Tensors, PEFTPrefix+mod.name+ab)
		}
	}
	l := LoRA{R: 8, Alpha: 16, TargetModules: targets}
	if err := m.attachLoRA(l, vals); err != nil {
		t.Fatal(err)
	}
	ids, mask := tensorRows(t, ts, "inputs.input_ids"), tensorRows(t, ts, "inputs.attention_mask")
	lora, err := m.Logits(ids, mask, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref, _, _ := loraFixture(t)
	for _, mod := range ref.Config.linearModules(0) {
		_, shape, err := ref.ParamValues(mod.name + ".weight")
		if err != nil {
			t.Fatal(err)
		}
		if err := ref.setParam(mod.name+".weight", shape, tensorFloats(t, ts, "merged."+mod.name+".weight"), true); err != nil {
			t.Fatal(err)
		}
	}
	merged, err := ref.Logits(ids, mask, nil)
	if err != nil {
		t.Fatal(err)
	}
	allClose(t, "LoRA forward vs merged.* forward", flat(t, lora), flat(t, merged), logitsAtol, logitsRtol, nil)
}

func TestAddLoRAStartsAtBase(t *testing.T) {
	m, _, ts := loraFixture(t)
	ids, mask := tensorRows(t, ts, "inputs.input_ids"), tensorRows(t, ts, "inputs.attention_mask")
	base, err := m.Logits(ids, mask, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddLoRA(LoRA{R: 4, Alpha: 8, TargetModules: []string{"q_proj", "v_proj"}}, 1); err != nil {
		t.Fatal(err)
	}
	names := m.LoRAVariableNames()
	if len(names) != 8 || names[0] != "model.layers.0.self_attn.q_proj.lora_A.weight" {
		t.Fatalf("LoRAVariableNames = %v", names)
	}
	a, shape, err := m.ParamValues(names[0])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(shape, []int{4, 64}) {
		t.Fatalf("lora_A shape %v, want [4 64]", shape)
	}
	nonzero := 0
	for _, x := range a {
		if x < -0.125 || x > 0.125 {
			t.Fatalf("lora_A value %g outside U(±1/√64)", x)
		}
		if x != 0 {
			nonzero++
		}
	}
	if nonzero == 0 {
		t.Fatal("lora_A is all zero")
	}
	got, err := m.Logits(ids, mask, nil)
	if err != nil {
		t.Fatal(err)
	}
	allClose(t, "logits with B = 0", flat(t, got), flat(t, base), 0, 0, nil)
	if err := m.AddLoRA(LoRA{R: 4, Alpha: 8, TargetModules: []string{"q_proj"}}, 1); err == nil {
		t.Fatal("second AddLoRA: no error")
	}
	if err := (&Model{Config: m.Config}).AddLoRA(LoRA{R: 4, Alpha: 8, TargetModules: []string{"qkv"}}, 1); err == nil || !strings.Contains(err.Error(), "match no linear module") {
		t.Fatalf("unknown target: err %v", err)
	}
}

// adapterCopy copies train-qwen2-lora's adapter into a temp dir with its
// config edited by edit and its tensors by editW.
func adapterCopy(t *testing.T, edit func(map[string]any), editW func(map[string]*safetensors.Tensor)) string {
	t.Helper()
	src := testutil.SharedPath(t, "fixtures/train-qwen2-lora")
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(src, AdapterConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(cfg)
	}
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, AdapterConfigFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.ReadFile(filepath.Join(src, AdapterWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	if editW != nil {
		editW(f.Tensors)
	}
	var ts []*safetensors.Tensor
	for _, x := range f.Tensors {
		ts = append(ts, x)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, AdapterWeightsFile), ts, safetensors.DefaultMetadata()); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoadAdapterRefusals(t *testing.T) {
	q := PEFTPrefix + "model.layers.1.self_attn.q_proj."
	cases := []struct {
		name  string
		edit  func(map[string]any)
		editW func(map[string]*safetensors.Tensor)
		want  string
	}{
		{"dora", func(c map[string]any) { c["use_dora"] = true }, nil, `"use_dora": true is not supported`},
		{"rslora", func(c map[string]any) { c["use_rslora"] = true }, nil, `"use_rslora": true is not supported`},
		{"bias", func(c map[string]any) { c["bias"] = "lora_only" }, nil, `"bias": lora_only is not supported`},
		{"peft type", func(c map[string]any) { c["peft_type"] = "IA3" }, nil, `"peft_type": IA3 is not supported`},
		{"modules_to_save", func(c map[string]any) { c["modules_to_save"] = []string{"lm_head"} }, nil, `"modules_to_save"`},
		{"regex targets", func(c map[string]any) { c["target_modules"] = ".*proj" }, nil, "a regular expression is not supported"},
		{"rank mismatch", func(c map[string]any) { c["r"] = 4 }, nil, `down_proj.lora_A.weight": shape [8 160], adapter_config.json and config.json want [4 160]`},
		{"missing tensor", nil, func(ts map[string]*safetensors.Tensor) { delete(ts, q+"lora_B.weight") },
			`tensor "base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight" missing (adapter_config.json wants shape [64 8])`},
		{"fewer targets than tensors", func(c map[string]any) { c["target_modules"] = []string{"q_proj"} }, nil, `unexpected tensor "base_model.model.model.layers.0.mlp.down_proj.lora_A.weight"`},
		{"no match", func(c map[string]any) { c["target_modules"] = []string{"c_attn"} }, nil, "match no linear module"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(testBackend(t), testutil.SharedPath(t, "fixtures/qwen2-tiny"))
			if err != nil {
				t.Fatal(err)
			}
			err = m.LoadAdapter(adapterCopy(t, tc.edit, tc.editW))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadAdapter: err %v\nwant it to contain %q", err, tc.want)
			}
			if m.LoRA != nil {
				t.Fatal("a refused adapter stayed attached")
			}
		})
	}
}

func TestSaveRoundTrip(t *testing.T) {
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			fx, m := loadFixture(t, name)
			dir := t.TempDir()
			if err := m.Save(dir); err != nil {
				t.Fatal(err)
			}
			back, err := Load(testBackend(t), dir)
			if err != nil {
				t.Fatal(err)
			}
			ids, mask := fx.ints(t, "inputs.input_ids"), fx.ints(t, "inputs.attention_mask")
			a, err := m.Logits(ids, mask, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := back.Logits(ids, mask, nil)
			if err != nil {
				t.Fatal(err)
			}
			allClose(t, "logits after Save/Load", flat(t, b), flat(t, a), 0, 0, nil)
		})
	}
}

// lora_dropout acts only while the context is training (PEFT applies
// nn.Dropout to x before lora_A).
func TestLoRADropoutOnlyWhileTraining(t *testing.T) {
	m, dir, ts := loraFixture(t)
	if err := m.LoadAdapter(dir); err != nil {
		t.Fatal(err)
	}
	m.LoRA.Dropout = 0.5
	ids, mask, labels := tensorRows(t, ts, "inputs.input_ids"), tensorRows(t, ts, "inputs.attention_mask"), tensorRows(t, ts, "inputs.labels")
	eval, err := m.Loss(ids, mask, labels)
	if err != nil {
		t.Fatal(err)
	}
	run := func(training bool) float32 {
		fn := func(ctx *context.Context, ids, mask, pos, lab *graph.Node) *graph.Node {
			ctx.SetTraining(ids.Graph(), training)
			return m.LossGraph(ctx, ids, mask, pos, lab)
		}
		e, err := context.NewExec(m.Backend, m.Ctx, fn)
		if err != nil {
			t.Fatal(err)
		}
		L := len(ids[0])
		out, err := e.Exec(nn.IntTensor(ids, L, 0), nn.IntTensor(mask, L, 0), nn.IntTensor(PositionIDs(mask), L, 0), nn.IntTensor(labels, L, 0))
		if err != nil {
			t.Fatal(err)
		}
		return tensors.ToScalar[float32](out[0])
	}
	allClose(t, "eval-mode loss", []float32{run(false)}, []float32{eval}, 1e-6, 1e-6, nil)
	allClose(t, "dropout 0.5 loss vs final_loss", []float32{eval}, tensorFloats(t, ts, "outputs.final_loss"), 1e-5, 1e-5, nil)
	if got := run(true); got == eval || math.IsNaN(float64(got)) {
		t.Fatalf("training-mode loss %g, want finite and different from eval %g (LoRA dropout active)", got, eval)
	}
}
