package decoder

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
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
	if !equalInts(shape, []int{4, 64}) {
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
