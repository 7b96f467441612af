package lora

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/testutil/tinyqwen"
	"github.com/ragforge/ragforge/models/testutil/trainfix"
	"github.com/ragforge/ragforge/models/tokenizer/bpe"
)

func TestValidateLoRA(t *testing.T) {
	ok := DefaultLoRA()
	for _, tc := range []struct {
		name string
		edit func(*decoder.LoRA)
		want string // error substring, "" = valid
	}{
		{"default", func(*decoder.LoRA) {}, ""},
		{"all-linear", func(a *decoder.LoRA) { a.TargetModules = []string{AllLinear} }, ""},
		{"r 0", func(a *decoder.LoRA) { a.R = 0 }, `r must be > 0`},
		{"alpha 0", func(a *decoder.LoRA) { a.Alpha = 0 }, `lora_alpha`},
		{"alpha NaN", func(a *decoder.LoRA) { a.Alpha = math.NaN() }, `lora_alpha`},
		{"dropout NaN", func(a *decoder.LoRA) { a.Dropout = math.NaN() }, `lora_dropout`},
		{"dropout 1", func(a *decoder.LoRA) { a.Dropout = 1 }, `lora_dropout`},
		{"dropout negative", func(a *decoder.LoRA) { a.Dropout = -0.1 }, `lora_dropout`},
		{"no targets", func(a *decoder.LoRA) { a.TargetModules = nil }, `target_modules`},
		{"unknown target", func(a *decoder.LoRA) { a.TargetModules = []string{"q_proj", "lm_head"} }, `"lm_head"`},
		{"T5 name", func(a *decoder.LoRA) { a.TargetModules = []string{"q"} }, `unknown module`},
		{"duplicate", func(a *decoder.LoRA) { a.TargetModules = []string{"q_proj", "q_proj"} }, `each module once`},
		{"all-linear mixed", func(a *decoder.LoRA) { a.TargetModules = []string{AllLinear, "q_proj"} }, `alone`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := ok
			a.TargetModules = slices.Clone(ok.TargetModules)
			tc.edit(&a)
			err := ValidateLoRA(a)
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
		{"lora", func(c *Config) { c.LoRA.R = 0 }, `r must be > 0`},
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
	got := []any{c.LoRA.R, c.LearningRate, c.WarmupSteps, c.BatchSize, c.Epochs, c.LoRA.Alpha, c.LoRA.Dropout, c.LoRA.TargetModules}
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
	want := readJSON(t, filepath.Join(fix, decoder.AdapterConfigFile))
	// The fixture's LoraConfig, target modules in the fixture's (unsorted) order.
	a := decoder.LoRA{R: 8, Alpha: 16, Dropout: 0, TargetModules: []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}}
	dir := t.TempDir()
	mods := []Module{{Name: "model.layers.0.self_attn.q_proj", In: 64, Out: 64}}
	w := map[string][]float32{mods[0].AKey(): make([]float32, 8*64), mods[0].BKey(): make([]float32, 64*8)}
	if err := WriteAdapter(dir, a, "qwen2-tiny", mods, w); err != nil {
		t.Fatal(err)
	}
	got := readJSON(t, filepath.Join(dir, decoder.AdapterConfigFile))
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
	raw, _ := os.ReadFile(filepath.Join(dir, decoder.AdapterConfigFile))
	if !strings.Contains(string(raw), `"lora_dropout": 0.0,`) || !strings.Contains(string(raw), `"lora_alpha": 16,`) {
		t.Errorf("numbers not written as Python's json.dumps writes them:\n%s", raw)
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

func TestEncodePairs(t *testing.T) {
	ids := func(s string) []int {
		var out []int
		for _, r := range s {
			out = append(out, int(r-'a')+3)
		}
		return out
	}
	prompt := func(s string) ([]int, error) {
		if s == "bad" {
			return nil, errors.New("template error")
		}
		return append([]int{1}, ids(s)...), nil
	}
	got, err := EncodePairs([]Pair{{"ab", "c"}, {"a", "bcd"}}, prompt, ids, 2, 5)
	want := []Example{{[]int{1, 3, 4}, []int{5, 2}}, {[]int{1, 3}, []int{4, 5, 2}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v %v, want %v", got, err, want)
	}
	if _, err := EncodePairs([]Pair{{"a", "b"}, {"bad", "b"}}, prompt, ids, 2, 5); err == nil || !strings.Contains(err.Error(), "record 2: prompt: template error") {
		t.Fatalf("error %v, want one naming record 2", err)
	}
	if _, err := EncodePairs([]Pair{{"abcd", "b"}}, prompt, ids, 2, 5); err == nil || !strings.Contains(err.Error(), "record 1") {
		t.Fatalf("error %v, want one naming record 1", err)
	}
}

// Tokenize renders a prompt as the decoder generates from it when the
// tokenizer has a chat template (ChatML, assistant turn opened: the ids
// lm.UserPromptIDs gives) and as raw text with the tokenizer's specials
// without it or when asked not to; the response is the same either way.
func TestTokenizeChatTemplate(t *testing.T) {
	dir := t.TempDir()
	tinyqwen.WriteTokenizer(t, dir)
	tok, err := bpe.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	pairs := []Pair{{Prompt: "Please write a passage.\nQuestion: gout?", Response: "Uric acid."}}
	chat, err := Tokenize(dir, pairs, 1024, true)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := Tokenize(dir, pairs, 1024, false)
	if err != nil {
		t.Fatal(err)
	}
	want := tok.Encode("<|im_start|>user\nPlease write a passage.\nQuestion: gout?<|im_end|>\n<|im_start|>assistant\n", false)
	if !reflect.DeepEqual(chat[0].Prompt, want) {
		t.Errorf("chat prompt %v, want ChatML %v", chat[0].Prompt, want)
	}
	if u, _ := lm.UserPromptIDs(tok, pairs[0].Prompt); !reflect.DeepEqual(chat[0].Prompt, u) {
		t.Errorf("chat prompt %v, generation encodes %v", chat[0].Prompt, u)
	}
	if w := tok.Encode(pairs[0].Prompt, true); !reflect.DeepEqual(raw[0].Prompt, w) {
		t.Errorf("raw prompt %v, want %v", raw[0].Prompt, w)
	}
	if !reflect.DeepEqual(chat[0].Response, raw[0].Response) || chat[0].Response[len(chat[0].Response)-1] != tok.EOSID() {
		t.Errorf("responses %v and %v, want equal, ending with eos %d", chat[0].Response, raw[0].Response, tok.EOSID())
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{Config: DefaultConfig(), ModelDir: "m", OutputDir: "o"}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"ok", func(*Options) {}, ""},
		{"no model", func(o *Options) { o.ModelDir = "" }, `"ModelDir"`},
		{"no output", func(o *Options) { o.OutputDir = "" }, `"OutputDir"`},
		{"config", func(o *Options) { o.Epochs = 0 }, `"Epochs"`},
	} {
		o := ok
		tc.edit(&o)
		err := o.Validate()
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
