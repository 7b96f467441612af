// Package decoder implements the decoder-only causal language models of the
// Llama family in GoMLX: Llama (HF LlamaForCausalLM), Qwen2
// (Qwen2ForCausalLM) and Qwen3 (Qwen3ForCausalLM), chosen by config.json's
// model_type through one registry (Families).
//
// The code mirrors Hugging Face transformers' modeling_llama.py /
// modeling_qwen2.py / modeling_qwen3.py bottom-up: RMSNorm → rotary
// embedding (rotate_half halves) → attention with grouped-query heads
// (repeat_kv) and, per family, q/k/v biases (Qwen2) or per-head q/k
// RMSNorms (Qwen3) → SwiGLU MLP → decoder layer → model → lm_head (tied to
// embed_tokens or not). Weights are GoMLX context variables whose scopes are
// the HF parameter names split at the dots
// ("model.layers.0.self_attn.q_proj.weight" is the variable "weight" in
// scope "/model/layers/0/self_attn/q_proj"), so that train/trainer can
// optimise them and LoRA adapters use PEFT's names (see LoRA).
package decoder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/ragforge/ragforge/models/hf"
)

// Family is what sets one decoder-only model type apart from the others;
// everything else (RMSNorm, RoPE, GQA, SwiGLU) is shared.
type Family struct {
	// Architecture is the HF class written into config.json "architectures".
	Architecture string
	// Defaults returns HF's config class defaults for keys config.json omits.
	Defaults func() Config
	// QKVBias: q_proj, k_proj and v_proj always carry a bias and o_proj
	// none (Qwen2Attention), whatever attention_bias says.
	QKVBias bool
	// QKNorm: per-head RMSNorm of q and k over head_dim before RoPE
	// (Qwen3Attention q_norm / k_norm).
	QKNorm bool
}

// Families is the registry of supported model_type values. A new Llama-like
// family is one line here (plus, if its math differs, a flag in Family).
var Families = map[string]Family{
	"llama": {Architecture: "LlamaForCausalLM", Defaults: llamaDefaults},
	"qwen2": {Architecture: "Qwen2ForCausalLM", Defaults: qwen2Defaults, QKVBias: true},
	"qwen3": {Architecture: "Qwen3ForCausalLM", Defaults: qwen3Defaults, QKNorm: true},
}

// ModelTypes returns the registered model_type values, sorted.
func ModelTypes() []string {
	out := make([]string, 0, len(Families))
	for k := range Families {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Config is the part of HF LlamaConfig / Qwen2Config / Qwen3Config the
// forward pass reads (json tags are the config.json keys).
type Config struct {
	ModelType             string   `json:"model_type"`
	Architectures         []string `json:"architectures"`
	VocabSize             int      `json:"vocab_size"`
	HiddenSize            int      `json:"hidden_size"`
	IntermediateSize      int      `json:"intermediate_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumKeyValueHeads      int      `json:"num_key_value_heads"` // 0 in the file (missing/null) → NumAttentionHeads (HF)
	HeadDim               int      `json:"head_dim"`            // missing/null → the family default (Qwen3 128), else HiddenSize / NumAttentionHeads (HF getattr(config, "head_dim", ...))
	HiddenAct             string   `json:"hidden_act"`          // only "silu" (SwiGLU) is supported
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	RMSNormEps            float64  `json:"rms_norm_eps"`
	RopeTheta             float64  `json:"rope_theta"`
	TieWordEmbeddings     bool     `json:"tie_word_embeddings"`
	AttentionBias         bool     `json:"attention_bias"` // llama, qwen3: bias on q/k/v/o_proj
	MLPBias               bool     `json:"mlp_bias"`       // llama: bias on gate/up/down_proj
	UseSlidingWindow      bool     `json:"use_sliding_window"`
	TorchDType            string   `json:"torch_dtype"`

	// BOSTokenID, PadTokenID: -1 when config.json has none (null or missing).
	BOSTokenID int `json:"-"`
	PadTokenID int `json:"-"`
	// EOSTokenIDs: config.json's eos_token_id, an int or a list (Llama 3.1).
	EOSTokenIDs []int `json:"-"`
	// RopeScaling is config.json's rope_scaling as written (null → nil);
	// only null and the "default" kind are accepted.
	RopeScaling json.RawMessage `json:"rope_scaling"`

	// DType is the dtype the graph computes in. Only Float32 is implemented;
	// the field is the seam for bfloat16 (weights are converted on load).
	DType dtypes.DType `json:"-"`

	raw []byte // config.json as read, written back unchanged by Save
}

// HF LlamaConfig() defaults (Llama-2-7B shapes).
func llamaDefaults() Config {
	return Config{
		ModelType: "llama", VocabSize: 32000, HiddenSize: 4096, IntermediateSize: 11008, NumHiddenLayers: 32,
		NumAttentionHeads: 32, HiddenAct: "silu", MaxPositionEmbeddings: 2048, RMSNormEps: 1e-6,
		RopeTheta: 10000, BOSTokenID: 1, EOSTokenIDs: []int{2}, PadTokenID: -1,
	}
}

// HF Qwen2Config() defaults (Qwen2-7B-like shapes; no bos/eos/pad in its signature).
func qwen2Defaults() Config {
	return Config{
		ModelType: "qwen2", VocabSize: 151936, HiddenSize: 4096, IntermediateSize: 22016, NumHiddenLayers: 32,
		NumAttentionHeads: 32, NumKeyValueHeads: 32, HiddenAct: "silu", MaxPositionEmbeddings: 32768,
		RMSNormEps: 1e-6, RopeTheta: 10000, BOSTokenID: -1, PadTokenID: -1,
	}
}

// HF Qwen3Config() defaults (Qwen3-8B-like shapes, head_dim 128).
func qwen3Defaults() Config {
	c := qwen2Defaults()
	c.ModelType, c.HeadDim = "qwen3", 128
	return c
}

// Family returns the registry entry of c.ModelType (zero Family when unknown;
// Validate refuses unknown types).
func (c Config) Family() Family { return Families[c.ModelType] }

// QDim is num_attention_heads·head_dim, the width of q_proj's output.
func (c Config) QDim() int { return c.NumAttentionHeads * c.HeadDim }

// KVDim is num_key_value_heads·head_dim, the width of k_proj / v_proj outputs.
func (c Config) KVDim() int { return c.NumKeyValueHeads * c.HeadDim }

// Validate checks the sizes and refuses what the forward pass does not
// implement, by name: unknown model_type, rope_scaling kinds other than
// default, sliding-window attention, activations other than silu, compute
// dtypes other than float32.
func (c Config) Validate() error {
	if _, ok := Families[c.ModelType]; !ok {
		return fmt.Errorf("field %q: unsupported model type %q (supported: %s)", "model_type", c.ModelType, strings.Join(ModelTypes(), ", "))
	}
	for _, p := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads}, {"head_dim", c.HeadDim},
		{"max_position_embeddings", c.MaxPositionEmbeddings},
	} {
		if p.v <= 0 {
			return fmt.Errorf("field %q: must be > 0, got %d", p.name, p.v)
		}
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("field %q: %d does not divide num_attention_heads %d", "num_key_value_heads", c.NumKeyValueHeads, c.NumAttentionHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("field %q: %d is odd; rotary embeddings rotate halves", "head_dim", c.HeadDim)
	}
	if c.RMSNormEps <= 0 {
		return fmt.Errorf("field %q: must be > 0, got %g", "rms_norm_eps", c.RMSNormEps)
	}
	if c.RopeTheta <= 0 {
		return fmt.Errorf("field %q: must be > 0, got %g", "rope_theta", c.RopeTheta)
	}
	if c.HiddenAct != "silu" {
		return fmt.Errorf("field %q: %q is not supported (the Llama-family MLP is SwiGLU, silu)", "hidden_act", c.HiddenAct)
	}
	if kind, err := ropeKind(c.RopeScaling); err != nil {
		return err
	} else if kind != "" && kind != "default" {
		return fmt.Errorf("field %q: rope type %q is not supported (only null or \"default\")", "rope_scaling", kind)
	}
	if c.UseSlidingWindow {
		return fmt.Errorf("field %q: sliding-window attention is not supported (set it to false: full causal attention)", "use_sliding_window")
	}
	if c.DType != dtypes.Float32 {
		return fmt.Errorf("compute dtype %s is not supported (only float32)", c.DType)
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"bos_token_id", c.BOSTokenID}, {"pad_token_id", c.PadTokenID}} {
		if p.v >= c.VocabSize {
			return fmt.Errorf("field %q: %d outside vocabulary [0,%d)", p.name, p.v, c.VocabSize)
		}
	}
	for _, id := range c.EOSTokenIDs {
		if id < 0 || id >= c.VocabSize {
			return fmt.Errorf("field %q: %d outside vocabulary [0,%d)", "eos_token_id", id, c.VocabSize)
		}
	}
	return nil
}

// ropeKind returns rope_scaling's "rope_type" (or legacy "type"); "" for null.
func ropeKind(raw json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return "", nil
	}
	var rs map[string]any
	if err := json.Unmarshal(raw, &rs); err != nil {
		return "", fmt.Errorf("field %q: want an object or null: %w", "rope_scaling", err)
	}
	for _, k := range []string{"rope_type", "type"} {
		if v, ok := rs[k]; ok {
			s, _ := v.(string)
			if s == "" {
				return "", fmt.Errorf("field %q: %q must be a string, got %v", "rope_scaling", k, v)
			}
			return s, nil
		}
	}
	return "", fmt.Errorf("field %q: no \"rope_type\" in %s", "rope_scaling", raw)
}

// LoadConfig reads dir/config.json: model_type picks the family (missing
// model_type is refused: the fix is to add it, e.g. "qwen2"), its HF
// defaults fill missing keys, num_key_value_heads and head_dim default as
// in HF, and the result is validated. Errors name the file and the field.
func LoadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, hf.ConfigName)
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("load config: %w", err)
	}
	c, err := ParseConfig(path, b)
	if err != nil {
		return Config{}, err
	}
	return c, nil
}

// ParseConfig is LoadConfig on the bytes b of the file at path.
func ParseConfig(path string, b []byte) (Config, error) {
	var probe map[string]json.RawMessage
	if err := hf.DecodeJSON(path, b, &probe); err != nil {
		return Config{}, fmt.Errorf("load config: %w", err)
	}
	wrap := func(err error) (Config, error) { return Config{}, fmt.Errorf("load config %s: %w", path, err) }
	var mt string
	if raw, ok := probe["model_type"]; !ok || string(raw) == "null" {
		return wrap(fmt.Errorf("field %q missing: add \"model_type\": one of %s (HF writes it with save_pretrained)", "model_type", strings.Join(ModelTypes(), ", ")))
	} else if err := json.Unmarshal(raw, &mt); err != nil {
		return wrap(fmt.Errorf("field %q: %w", "model_type", err))
	}
	fam, ok := Families[mt]
	if !ok {
		return wrap(fmt.Errorf("field %q: unsupported model type %q (supported: %s)", "model_type", mt, strings.Join(ModelTypes(), ", ")))
	}
	c := fam.Defaults()
	hfDefaultHeadDim := c.HeadDim
	c.HeadDim, c.NumKeyValueHeads = 0, 0
	if err := json.Unmarshal(b, &c); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return wrap(fmt.Errorf("field %q: %w", te.Field, err))
		}
		return wrap(err)
	}
	if c.HeadDim == 0 {
		// HF 4.51 attention reads getattr(config, "head_dim", hidden //
		// heads): the key when config.json has it (any family), else
		// Qwen3Config's default 128, else hidden / heads.
		if _, present := probe["head_dim"]; !present && hfDefaultHeadDim > 0 {
			c.HeadDim = hfDefaultHeadDim
		} else if c.NumAttentionHeads > 0 {
			c.HeadDim = c.HiddenSize / c.NumAttentionHeads
		}
	}
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"bos_token_id", &c.BOSTokenID}, {"pad_token_id", &c.PadTokenID}} {
		if raw, ok := probe[f.key]; ok {
			id, err := optionalID(raw)
			if err != nil {
				return wrap(fmt.Errorf("field %q: %w", f.key, err))
			}
			*f.dst = id
		}
	}
	if raw, ok := probe["eos_token_id"]; ok {
		ids, err := idList(raw)
		if err != nil {
			return wrap(fmt.Errorf("field %q: %w", "eos_token_id", err))
		}
		c.EOSTokenIDs = ids
	}
	c.DType = dtypes.Float32
	c.raw = slices.Clone(b)
	if err := c.Validate(); err != nil {
		return wrap(err)
	}
	return c, nil
}

// optionalID decodes an int or null (→ -1).
func optionalID(raw json.RawMessage) (int, error) {
	if string(bytes.TrimSpace(raw)) == "null" {
		return -1, nil
	}
	var id int
	if err := json.Unmarshal(raw, &id); err != nil {
		return 0, fmt.Errorf("want an integer or null: %w", err)
	}
	return id, nil
}

// idList decodes an int, a list of ints or null (→ nil), as HF accepts for eos_token_id.
func idList(raw json.RawMessage) ([]int, error) {
	s := bytes.TrimSpace(raw)
	if string(s) == "null" {
		return nil, nil
	}
	if len(s) > 0 && s[0] == '[' {
		var ids []int
		if err := json.Unmarshal(s, &ids); err != nil {
			return nil, fmt.Errorf("want an integer or a list of integers: %w", err)
		}
		return ids, nil
	}
	var id int
	if err := json.Unmarshal(s, &id); err != nil {
		return nil, fmt.Errorf("want an integer or a list of integers: %w", err)
	}
	return []int{id}, nil
}

// MarshalConfig returns the config.json bytes Save writes: the file as read
// when the config came from one, otherwise an HF-style config of the
// modelled keys (indent 2, trailing newline).
func (c Config) MarshalConfig() ([]byte, error) {
	if c.raw != nil {
		return c.raw, nil
	}
	m := map[string]any{
		"model_type": c.ModelType, "architectures": []string{c.Family().Architecture},
		"vocab_size": c.VocabSize, "hidden_size": c.HiddenSize, "intermediate_size": c.IntermediateSize,
		"num_hidden_layers": c.NumHiddenLayers, "num_attention_heads": c.NumAttentionHeads,
		"num_key_value_heads": c.NumKeyValueHeads, "hidden_act": c.HiddenAct,
		"max_position_embeddings": c.MaxPositionEmbeddings, "rms_norm_eps": c.RMSNormEps, "rope_theta": c.RopeTheta,
		"tie_word_embeddings": c.TieWordEmbeddings, "use_sliding_window": c.UseSlidingWindow,
		"torch_dtype": "float32", "rope_scaling": nil,
	}
	m["head_dim"] = c.HeadDim
	if !c.Family().QKVBias {
		m["attention_bias"] = c.AttentionBias
	}
	if c.ModelType == "llama" {
		m["mlp_bias"] = c.MLPBias
	}
	for k, id := range map[string]int{"bos_token_id": c.BOSTokenID, "pad_token_id": c.PadTokenID} {
		if id >= 0 {
			m[k] = id
		}
	}
	switch len(c.EOSTokenIDs) {
	case 0:
	case 1:
		m["eos_token_id"] = c.EOSTokenIDs[0]
	default:
		m["eos_token_id"] = c.EOSTokenIDs
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// TinyConfig is the `ragforge models init --size tiny` shape of modelType
// (llama, qwen2, qwen3; HF's family defaults otherwise) for a vocabulary of
// vocab ids: the qwen2-tiny fixture's layers (hidden 64, 2 layers, 4 heads
// / 2 kv heads, head_dim 16, intermediate 160, untied lm_head, rope_theta
// 1e4) with 1024 positions, so that SL-HyDE's prompts and generated
// passages fit. bos/eos/pad are left unset (-1, none) for the caller to
// take from the tokenizer. Errors: an unknown model type, by name.
func TinyConfig(modelType string, vocab int) (Config, error) {
	f, ok := Families[modelType]
	if !ok {
		return Config{}, fmt.Errorf("tiny decoder: unsupported model type %q (supported: %s)", modelType, strings.Join(ModelTypes(), ", "))
	}
	c := f.Defaults()
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = vocab, 64, 160, 2
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim = 4, 2, 16
	c.MaxPositionEmbeddings, c.RopeTheta, c.TieWordEmbeddings = 1024, 1e4, false
	c.BOSTokenID, c.PadTokenID, c.EOSTokenIDs = -1, -1, nil
	c.DType = dtypes.Float32
	return c, nil
}
