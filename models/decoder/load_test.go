package decoder

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/safetensors"
)

// fixtureCopy writes fixture name's config.json, edited by edit, and its
// weights, edited by editW (nil = unchanged), into a temp directory.
func fixtureCopy(t *testing.T, name string, edit func(cfg map[string]any), editW func(ts map[string]*safetensors.Tensor)) string {
	t.Helper()
	src := testutil.SharedPath(t, filepath.Join("fixtures", name))
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(src, "config.json"))
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
	if b, err = json.MarshalIndent(cfg, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.ReadFile(filepath.Join(src, WeightsFile))
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
	if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), ts, safetensors.DefaultMetadata()); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoadRefusals(t *testing.T) {
	cases := []struct {
		name    string
		fixture string
		edit    func(map[string]any)
		editW   func(map[string]*safetensors.Tensor)
		want    string
	}{
		{"unknown model_type", "llama-tiny", func(c map[string]any) { c["model_type"] = "mistral" }, nil, `unsupported model type "mistral" (supported: llama, qwen2, qwen3)`},
		{"missing model_type", "llama-tiny", func(c map[string]any) { delete(c, "model_type") }, nil, `add "model_type"`},
		{"rope llama3", "llama-tiny", func(c map[string]any) {
			c["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": 8.0}
		}, nil, `rope type "llama3" is not supported`},
		{"rope yarn legacy key", "qwen2-tiny", func(c map[string]any) {
			c["rope_scaling"] = map[string]any{"type": "yarn", "factor": 4.0}
		}, nil, `rope type "yarn" is not supported`},
		{"rope linear", "qwen3-tiny", func(c map[string]any) {
			c["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": 2.0}
		}, nil, `rope type "linear" is not supported`},
		{"sliding window", "qwen2-tiny", func(c map[string]any) { c["use_sliding_window"] = true }, nil, `"use_sliding_window": sliding-window attention is not supported`},
		{"activation", "llama-tiny", func(c map[string]any) { c["hidden_act"] = "gelu" }, nil, `"hidden_act": "gelu" is not supported`},
		{"kv heads", "qwen2-tiny", func(c map[string]any) { c["num_key_value_heads"] = 3 }, nil, `"num_key_value_heads": 3 does not divide num_attention_heads 4`},
		{"wrong shape", "qwen2-tiny", func(c map[string]any) { c["intermediate_size"] = 128 }, nil,
			`tensor "model.layers.0.mlp.down_proj.weight": shape [64 160], config.json wants [64 128]`},
		{"missing tensor", "qwen3-tiny", nil, func(ts map[string]*safetensors.Tensor) { delete(ts, "model.layers.1.self_attn.k_norm.weight") },
			`tensor "model.layers.1.self_attn.k_norm.weight" missing (config.json wants shape [32])`},
		{"untied without lm_head", "qwen2-tiny", nil, func(ts map[string]*safetensors.Tensor) { delete(ts, "lm_head.weight") },
			`tensor "lm_head.weight" missing`},
		{"unexpected tensor", "llama-tiny", nil, func(ts map[string]*safetensors.Tensor) {
			ts["model.layers.0.self_attn.q_proj.bias"] = safetensors.FromFloat32("model.layers.0.self_attn.q_proj.bias", []int{64}, make([]float32, 64))
		}, `unexpected tensor "model.layers.0.self_attn.q_proj.bias" shape [64]`},
		{"qwen2 as llama loses biases", "qwen2-tiny", func(c map[string]any) { c["model_type"] = "llama" }, nil, `unexpected tensor "model.layers.0.self_attn.k_proj.bias"`},
		{"tied lm_head that differs", "llama-tiny", nil, func(ts map[string]*safetensors.Tensor) {
			ts["lm_head.weight"] = safetensors.FromFloat32("lm_head.weight", []int{512, 64}, make([]float32, 512*64))
		}, `unexpected tensor "lm_head.weight"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := fixtureCopy(t, tc.fixture, tc.edit, tc.editW)
			_, err := Load(testBackend(t), dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: err %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLoadAccepts(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(map[string]any)
		editW func(map[string]*safetensors.Tensor)
	}{
		{"rope_scaling default", func(c map[string]any) { c["rope_scaling"] = map[string]any{"rope_type": "default"} }, nil},
		{"eos list", func(c map[string]any) { c["eos_token_id"] = []int{2, 3} }, nil},
		{"tied lm_head copy", nil, func(ts map[string]*safetensors.Tensor) {
			e := ts["model.embed_tokens.weight"]
			ts["lm_head.weight"] = &safetensors.Tensor{Name: "lm_head.weight", DType: e.DType, Shape: e.Shape, Data: e.Data}
		}},
		{"rotary inv_freq buffer", nil, func(ts map[string]*safetensors.Tensor) {
			n := "model.layers.0.self_attn.rotary_emb.inv_freq"
			ts[n] = safetensors.FromFloat32(n, []int{8}, make([]float32, 8))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(testBackend(t), fixtureCopy(t, "llama-tiny", tc.edit, tc.editW))
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "eos list" && !slices.Equal(m.Config.EOSTokenIDs, []int{2, 3}) {
				t.Fatalf("eos ids %v", m.Config.EOSTokenIDs)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	cases := []struct {
		name, json         string
		heads, kv, headDim int
		eos                []int
		bos, pad, maxPos   int
	}{
		{"llama: kv and head_dim derived", `{"model_type":"llama","hidden_size":64,"num_attention_heads":4,"vocab_size":10}`, 4, 4, 16, []int{2}, 1, -1, 2048},
		{"llama: head_dim null", `{"model_type":"llama","hidden_size":64,"num_attention_heads":4,"head_dim":null,"vocab_size":10}`, 4, 4, 16, []int{2}, 1, -1, 2048},
		{"qwen2: head_dim key honoured", `{"model_type":"qwen2","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"vocab_size":10}`, 4, 2, 32, nil, -1, -1, 32768},
		{"qwen2: head_dim derived", `{"model_type":"qwen2","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":10}`, 4, 2, 16, nil, -1, -1, 32768},
		{"qwen3: head_dim default 128", `{"model_type":"qwen3","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":10,"eos_token_id":[3,4],"pad_token_id":null}`, 4, 2, 128, []int{3, 4}, -1, -1, 32768},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig("config.json", []byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			if c.NumAttentionHeads != tc.heads || c.NumKeyValueHeads != tc.kv || c.HeadDim != tc.headDim ||
				!slices.Equal(c.EOSTokenIDs, tc.eos) || c.BOSTokenID != tc.bos || c.PadTokenID != tc.pad || c.MaxPositionEmbeddings != tc.maxPos {
				t.Fatalf("got heads %d kv %d head_dim %d eos %v bos %d pad %d max_pos %d", c.NumAttentionHeads, c.NumKeyValueHeads,
					c.HeadDim, c.EOSTokenIDs, c.BOSTokenID, c.PadTokenID, c.MaxPositionEmbeddings)
			}
		})
	}
}

func TestGenerationConfig(t *testing.T) {
	dir := fixtureCopy(t, "qwen2-tiny", nil, nil)
	m, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	if o := m.GenerateOptions(); o.DoSample || o.MaxNewTokens != 20 || !slices.Equal(o.EOSTokenIDs, []int{2}) || o.TopK != 50 {
		t.Fatalf("without generation_config.json: %+v", o)
	}
	gc := `{"bos_token_id": 1, "do_sample": true, "eos_token_id": [2, 7], "pad_token_id": 0, "temperature": 0.7, "top_k": 20, "top_p": 0.8, "repetition_penalty": 1.05, "transformers_version": "4.51.0"}`
	if err := os.WriteFile(filepath.Join(dir, GenerationConfigFile), []byte(gc), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err = Load(testBackend(t), dir); err != nil {
		t.Fatal(err)
	}
	o := m.GenerateOptions()
	if !o.DoSample || o.Temperature != 0.7 || o.TopK != 20 || o.TopP != 0.8 || !slices.Equal(o.EOSTokenIDs, []int{2, 7}) {
		t.Fatalf("with Qwen2-Instruct-style generation_config.json: %+v", o)
	}
	if err := os.WriteFile(filepath.Join(dir, GenerationConfigFile), []byte(`{"eos_token_id": 2, "top_p": 1.5}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(testBackend(t), dir); err == nil || !strings.Contains(err.Error(), "top_p 1.5") {
		t.Fatalf("top_p 1.5: err %v", err)
	}
}

// bf16 rounds a float32 to bfloat16 (round to nearest even), as torch's .to(torch.bfloat16).
func bf16(x float32) uint16 {
	b := math.Float32bits(x)
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// A sharded BF16 copy (safetensors.WriteShards, several shards + index)
// loads to exactly the float32 model with bf16-rounded weights, and its
// logits stay within a bf16 tolerance of the float32 reference.
func TestLoadShardedBF16(t *testing.T) {
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			fx, _ := loadFixture(t, name)
			src, err := safetensors.ReadFile(filepath.Join(fx.dir, WeightsFile))
			if err != nil {
				t.Fatal(err)
			}
			ref, err := Load(testBackend(t), fx.dir)
			if err != nil {
				t.Fatal(err)
			}
			var ts []*safetensors.Tensor
			for _, n := range src.Names() {
				v, err := src.Tensors[n].Float32()
				if err != nil {
					t.Fatal(err)
				}
				data := make([]byte, 2*len(v))
				r := make([]float32, len(v))
				for i, x := range v {
					h := bf16(x)
					data[2*i], data[2*i+1] = byte(h), byte(h>>8)
					r[i] = math.Float32frombits(uint32(h) << 16)
				}
				ts = append(ts, &safetensors.Tensor{Name: n, DType: safetensors.BF16, Shape: src.Tensors[n].Shape, Data: data})
				if err := ref.setParam(n, src.Tensors[n].Shape, r, true); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			if err := safetensors.WriteShards(dir, ts, 40_000); err != nil {
				t.Fatal(err)
			}
			shards, _ := filepath.Glob(filepath.Join(dir, "model-*-of-*.safetensors"))
			if len(shards) < 3 {
				t.Fatalf("%d shards, want several", len(shards))
			}
			b, err := os.ReadFile(filepath.Join(fx.dir, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := Load(testBackend(t), dir)
			if err != nil {
				t.Fatal(err)
			}
			ids, mask := fx.ints(t, "inputs.input_ids"), fx.ints(t, "inputs.attention_mask")
			lg, err := got.Logits(ids, mask, nil)
			if err != nil {
				t.Fatal(err)
			}
			lr, err := ref.Logits(ids, mask, nil)
			if err != nil {
				t.Fatal(err)
			}
			allClose(t, "bf16 sharded vs rounded float32", flat(t, lg), flat(t, lr), 0, 0, nil)
			// bf16 keeps 8 significant bits (relative rounding ≤ 2^-9): the
			// logits (|max| ≤ 1.3) move by a few 1e-3, far above float32's 1e-4.
			allClose(t, "bf16 vs fixture logits", flat(t, lg), fx.floats(t, "outputs.logits"), 1e-2, 1e-2, nil)
		})
	}
}
