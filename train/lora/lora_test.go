package lora

import (
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

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/internal/testutil/trainfix"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/safetensors"
)

func TestAdapterValidate(t *testing.T) {
	ok := DefaultAdapter()
	for _, tc := range []struct {
		name string
		edit func(*Adapter)
		want string // error substring, "" = valid
	}{
		{"default", func(*Adapter) {}, ""},
		{"all-linear", func(a *Adapter) { a.TargetModules = []string{AllLinear} }, ""},
		{"r 0", func(a *Adapter) { a.R = 0 }, `"r"`},
		{"alpha 0", func(a *Adapter) { a.Alpha = 0 }, `"lora_alpha"`},
		{"alpha NaN", func(a *Adapter) { a.Alpha = math.NaN() }, `"lora_alpha"`},
		{"dropout 1", func(a *Adapter) { a.Dropout = 1 }, `"lora_dropout"`},
		{"dropout negative", func(a *Adapter) { a.Dropout = -0.1 }, `"lora_dropout"`},
		{"no targets", func(a *Adapter) { a.TargetModules = nil }, `"target_modules"`},
		{"unknown target", func(a *Adapter) { a.TargetModules = []string{"q_proj", "lm_head"} }, `"lm_head"`},
		{"T5 name", func(a *Adapter) { a.TargetModules = []string{"q"} }, `unknown module`},
		{"duplicate", func(a *Adapter) { a.TargetModules = []string{"q_proj", "q_proj"} }, `each module once`},
		{"all-linear mixed", func(a *Adapter) { a.TargetModules = []string{AllLinear, "q_proj"} }, `alone`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := ok
			a.TargetModules = slices.Clone(ok.TargetModules)
			tc.edit(&a)
			err := a.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %s", err, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"default", func(*Config) {}, ""},
		{"lr 0", func(c *Config) { c.LearningRate = 0 }, `"LearningRate"`},
		{"warmup negative", func(c *Config) { c.WarmupSteps = -1 }, `"WarmupSteps"`},
		{"epochs 0", func(c *Config) { c.Epochs = 0 }, `"Epochs"`},
		{"batch 0", func(c *Config) { c.BatchSize = 0 }, `"BatchSize"`},
		{"accumulation 0", func(c *Config) { c.GradAccumulation = 0 }, `"GradAccumulation"`},
		{"clip negative", func(c *Config) { c.MaxGradNorm = -1 }, `"MaxGradNorm"`},
		{"max length 1", func(c *Config) { c.MaxLength = 1 }, `"MaxLength"`},
		{"adapter", func(c *Config) { c.Adapter.R = 0 }, `"r"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %s", err, tc.want)
			}
		})
	}
}

// TestDefaultsCiteThePaper pins the SL-HyDE generator SFT values.
func TestDefaultsCiteThePaper(t *testing.T) {
	c := DefaultConfig()
	got := []any{c.Adapter.R, c.LearningRate, c.WarmupSteps, c.BatchSize, c.Epochs, c.Adapter.Alpha, c.Adapter.Dropout, c.Adapter.TargetModules}
	want := []any{8, 1e-5, 200, 2, 1, 8.0, 0.0, []string{"q_proj", "v_proj"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults %v, want %v", got, want)
	}
}

// readJSON parses a JSON file into a generic value.
func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// peft015Only are the keys peft 0.15 writes that the fixture's
// adapter_config.json (written by an older peft) lacks, with their defaults.
var peft015Only = map[string]any{"corda_config": nil, "eva_config": nil, "exclude_modules": nil, "lora_bias": false, "trainable_token_indices": nil}

func TestAdapterConfigMatchesPEFT(t *testing.T) {
	fix := testutil.SharedPath(t, "fixtures/train-qwen2-lora")
	want := readJSON(t, filepath.Join(fix, AdapterConfigFile))
	// The fixture's LoraConfig, target modules in the fixture's (unsorted) order.
	a := Adapter{R: 8, Alpha: 16, Dropout: 0, TargetModules: []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}}
	dir := t.TempDir()
	mods := []Module{{Name: "model.layers.0.self_attn.q_proj", In: 64, Out: 64}}
	w := map[string][]float32{mods[0].AKey(): make([]float32, 8*64), mods[0].BKey(): make([]float32, 64*8)}
	if err := WriteAdapter(dir, a, "qwen2-tiny", mods, w); err != nil {
		t.Fatal(err)
	}
	got := readJSON(t, filepath.Join(dir, AdapterConfigFile))
	for k, v := range peft015Only {
		gv, ok := got[k]
		if !ok || !reflect.DeepEqual(gv, v) {
			t.Errorf("key %q: %v (present %v), want %v as peft 0.15 writes it", k, gv, ok, v)
		}
		delete(got, k)
	}
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.MarshalIndent(got, "", " ")
		t.Fatalf("adapter_config.json differs from the fixture:\n%s", gb)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, AdapterConfigFile))
	if !strings.Contains(string(raw), `"lora_dropout": 0.0,`) || !strings.Contains(string(raw), `"lora_alpha": 16,`) {
		t.Errorf("numbers not written as Python's json.dumps writes them:\n%s", raw)
	}
	// Read back: the same adapter, targets sorted.
	back, base, err := ReadAdapterConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	norm, _ := a.Normalize()
	if base != "qwen2-tiny" || !reflect.DeepEqual(back, norm) {
		t.Fatalf("read back %+v base %q, want %+v", back, base, norm)
	}
	// And the fixture's own file reads.
	if _, _, err := ReadAdapterConfig(fix); err != nil {
		t.Fatal(err)
	}
}

func TestReadAdapterConfigRefuses(t *testing.T) {
	for _, tc := range []struct{ edit, want string }{
		{`"use_dora": true`, `"use_dora"`},
		{`"peft_type": "IA3"`, `"peft_type"`},
		{`"bias": "all"`, `"bias"`},
		{`"target_modules": ["q_proj", "c_attn"]`, `"c_attn"`},
		{`"rank_pattern": {"q_proj": 4}`, `"rank_pattern"`},
	} {
		dir := t.TempDir()
		body := `{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "bias": "none", "target_modules": ["q_proj"], ` + tc.edit + `}`
		// A later key wins in encoding/json, so the edit overrides.
		if err := os.WriteFile(filepath.Join(dir, AdapterConfigFile), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ReadAdapterConfig(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %s", tc.edit, err, tc.want)
		}
	}
}

func TestInitA(t *testing.T) {
	mods := []Module{{Name: "a", In: 64, Out: 32}, {Name: "b", In: 160, Out: 64}}
	x := InitA(mods, 8, 7)
	y := InitA(mods, 8, 7)
	z := InitA(mods, 8, 8)
	if !reflect.DeepEqual(x, y) {
		t.Fatal("same seed, different init")
	}
	if reflect.DeepEqual(x, z) {
		t.Fatal("different seeds, same init")
	}
	for _, m := range mods {
		v := x[m.AKey()]
		bound := 1 / math.Sqrt(float64(m.In))
		if len(v) != 8*m.In {
			t.Fatalf("%s: %d values, want %d", m.AKey(), len(v), 8*m.In)
		}
		var mx, sum2 float64
		for _, f := range v {
			mx = math.Max(mx, math.Abs(float64(f)))
			sum2 += float64(f) * float64(f)
		}
		// U(±b): max close to b, variance b²/3.
		if mx > bound || mx < 0.95*bound {
			t.Errorf("%s: max|A| %.4g, want within [0.95, 1]·%.4g", m.AKey(), mx, bound)
		}
		if v2 := sum2 / float64(len(v)); math.Abs(v2-bound*bound/3) > 0.15*bound*bound/3 {
			t.Errorf("%s: variance %.4g, want ≈ %.4g", m.AKey(), v2, bound*bound/3)
		}
	}
	// The fixture's init (torch's draw) follows the same law: A within
	// ±1/√in and filling it, B zero.
	f, err := safetensors.ReadFile(filepath.Join(testutil.SharedPath(t, "fixtures/train-qwen2-lora"), "init.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	for name, tt := range f.Tensors {
		v, err := tt.Float32()
		if err != nil {
			t.Fatal(err)
		}
		var mx float64
		for _, x := range v {
			mx = math.Max(mx, math.Abs(float64(x)))
		}
		switch {
		case strings.HasSuffix(name, ".lora_B.weight") && mx != 0:
			t.Errorf("%s: max|B| %g, want 0", name, mx)
		case strings.HasSuffix(name, ".lora_A.weight"):
			if b := 1 / math.Sqrt(float64(tt.Shape[1])); mx > b || mx < 0.9*b {
				t.Errorf("%s: max|A| %.4g, want within [0.9, 1]·%.4g", name, mx, b)
			}
		}
	}
}

// fixtureExamples are expected.json → data.examples of train-qwen2-lora.
func fixtureExamples(t *testing.T, fx *trainfix.Fixture) []Example {
	t.Helper()
	var data struct {
		Examples []struct{ Prompt, Response []int } `json:"examples"`
	}
	if err := json.Unmarshal(fx.JSON["data"], &data); err != nil {
		t.Fatal(err)
	}
	var out []Example
	for _, e := range data.Examples {
		// The fixture's response already ends with eos (2).
		ex, err := EncodeExample(e.Prompt, e.Response[:len(e.Response)-1], 2, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ex)
	}
	return out
}

func TestBatchMatchesFixture(t *testing.T) {
	fx := trainfix.Load(t, testutil.SharedPath(t, "fixtures/train-qwen2-lora"))
	b := NewBatch(fixtureExamples(t, fx), 2, 0)
	ids, shape := fx.Int64(t, "inputs.input_ids")
	mask, _ := fx.Int64(t, "inputs.attention_mask")
	labels, _ := fx.Int64(t, "inputs.labels")
	W := shape[1]
	if b.Rows != 2 || b.Len < W {
		t.Fatalf("batch %d×%d, want 2×≥%d", b.Rows, b.Len, W)
	}
	if b.ScoredTokens != 8 {
		t.Errorf("scored tokens %d, want 8 (expected.json num_loss_tokens)", b.ScoredTokens)
	}
	for r := range 2 {
		for j := range b.Len {
			k := r*b.Len + j
			wantID, wantMask, wantLab := int64(0), int64(0), int64(IgnoreIndex)
			if j < W {
				wantID, wantMask, wantLab = ids[r*W+j], mask[r*W+j], labels[r*W+j]
			}
			if int64(b.IDs[k]) != wantID || int64(b.Mask[k]) != wantMask || int64(b.Labels[k]) != wantLab || b.Positions[k] != int32(j) {
				t.Fatalf("row %d col %d: id %d mask %d label %d pos %d, want %d %d %d %d", r, j, b.IDs[k], b.Mask[k], b.Labels[k], b.Positions[k], wantID, wantMask, wantLab, j)
			}
		}
	}
}

func TestEncodeExample(t *testing.T) {
	for _, tc := range []struct {
		name             string
		prompt, response []int
		max              int
		want             Example
		err              string
	}{
		{"fits", []int{5, 6}, []int{7, 8}, 8, Example{[]int{5, 6}, []int{7, 8, 2}}, ""},
		{"response cut, eos kept", []int{5, 6}, []int{7, 8, 9}, 4, Example{[]int{5, 6}, []int{7, 2}}, ""},
		{"prompt too long", []int{5, 6, 7}, []int{8}, 4, Example{}, "no room"},
		{"empty response", []int{5}, nil, 4, Example{}, "empty response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EncodeExample(tc.prompt, tc.response, 2, tc.max)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v %v, want %v", got, err, tc.want)
			}
		})
	}
}

// TestLossGraph checks the shifted cross-entropy on a hand-computed case:
// logits of two tokens, so each scored position's NLL is log(1+e^(other−own)).
func TestLossGraph(t *testing.T) {
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	// B 1, L 3, V 2. Position 0 predicts token 1 (label at index 1), position
	// 1 predicts token 0 (label at index 2), position 2 predicts nothing.
	logits := []float32{0, 1, 2, 0, 9, -9}
	labels := []int32{IgnoreIndex, 1, 0}
	got := graph.MustExecOnce(be, func(l, y *graph.Node) *graph.Node { return LossGraph(l, y) },
		tensors.FromFlatDataAndDimensions(logits, 1, 3, 2), tensors.FromFlatDataAndDimensions(labels, 1, 3))
	want := (math.Log1p(math.Exp(-1)) + math.Log1p(math.Exp(-2))) / 2
	if g := float64(got.Value().(float32)); math.Abs(g-want) > 1e-6 {
		t.Fatalf("loss %.7f, want %.7f", g, want)
	}
}

func TestReadSFT(t *testing.T) {
	want := []Pair{
		{"Please write a medical passage to answer the question.\nwhat causes gout?", "Gout is caused by uric acid crystals."},
		{"Please write a medical passage to answer the question.\naspirin <dose> & \"heart\"", "Aspirin 75 mg daily."},
	}
	wantMsg := []Pair{
		{"Q: what causes gout?\nA:", "Gout is caused by uric acid crystals."},
		{"Q: aspirin <dose> & \"heart\"\nA:", "Aspirin 75 mg daily."},
	}
	// The files train/selflearn writes (its golden outputs).
	for file, w := range map[string][]Pair{"sft_alpaca.golden.jsonl": want, "sft_messages.golden.jsonl": wantMsg} {
		got, err := ReadSFT(filepath.Join("..", "selflearn", "testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s: %q, want %q", file, got, w)
		}
	}
	for _, tc := range []struct{ body, want string }{
		{`{"instruction": "x"}`, `"output"`},
		{`{"input": "x", "output": "y"}`, `"instruction"`},
		{`{"instruction": "x", "output": ""}`, `empty response`},
		{`{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]}`, `"messages"`},
		{`{"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}], "output": "y"}`, `not both`},
		{"\n\n", `no records`},
		{`{"instruction": 1}`, `line 1`},
	} {
		p := filepath.Join(t.TempDir(), "sft.jsonl")
		if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSFT(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %s", tc.body, err, tc.want)
		}
	}
}
