// Package t5 implements the T5 encoder–decoder (HF T5ForConditionalGeneration)
// in GoMLX: original T5 v1.0 (relu FF, tied embeddings), T5 v1.1 / Flan-T5
// (gated-gelu FF, untied lm_head) and checkpoints whose attention width
// num_heads*d_kv differs from d_model.
//
// The code mirrors Hugging Face transformers' models/t5/modeling_t5.py
// bottom-up: T5LayerNorm (RMS) → T5DenseActDense / T5DenseGatedActDense →
// T5Attention with _relative_position_bucket → T5LayerSelfAttention /
// T5LayerCrossAttention / T5LayerFF → T5Block → T5Stack → LM head. Weights
// live as GoMLX context variables whose scopes are the HF parameter names
// split at the dots ("encoder.block.0.layer.0.SelfAttention.q.weight" is the
// variable "weight" in scope "/encoder/block/0/layer/0/SelfAttention/q"), so
// that pkg/ml/train can optimise them and Save can write them back as an HF
// checkpoint.
package t5

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ragforge/ragforge/models/hf"
)

// ConfigFile is the HF config file name inside a checkpoint directory.
const ConfigFile = "config.json"

// Config is HF T5Config (json tags are the config.json keys). Defaults (see
// DefaultConfig) are HF's T5Config defaults, i.e. t5-small of Raffel et al. 2020.
//
// Keys this struct does not model are kept in raw order and written back by
// Save unchanged, so Load→Save reproduces an equivalent (for HF-written files,
// byte-identical) config.json.
type Config struct {
	VocabSize                    int      `json:"vocab_size"`
	DModel                       int      `json:"d_model"`
	DKV                          int      `json:"d_kv"`
	DFF                          int      `json:"d_ff"`
	NumLayers                    int      `json:"num_layers"`
	NumDecoderLayers             int      `json:"num_decoder_layers"` // defaults to NumLayers when missing or null (HF)
	NumHeads                     int      `json:"num_heads"`
	RelativeAttentionNumBuckets  int      `json:"relative_attention_num_buckets"`
	RelativeAttentionMaxDistance int      `json:"relative_attention_max_distance"`
	DropoutRate                  float64  `json:"dropout_rate"`       // used only when ctx.IsTraining
	LayerNormEpsilon             float64  `json:"layer_norm_epsilon"` // RMS-norm epsilon
	InitializerFactor            float64  `json:"initializer_factor"` // HF _init_weights scale (1.0)
	FeedForwardProj              string   `json:"feed_forward_proj"`  // "relu" | "gelu" | "gated-gelu" | "gated-relu"
	TieWordEmbeddings            bool     `json:"tie_word_embeddings"`
	IsEncoderDecoder             bool     `json:"is_encoder_decoder"`
	UseCache                     bool     `json:"use_cache"`
	PadTokenID                   int      `json:"pad_token_id"`
	EOSTokenID                   int      `json:"eos_token_id"`
	DecoderStartTokenID          int      `json:"decoder_start_token_id"`
	ModelType                    string   `json:"model_type"`
	Architectures                []string `json:"architectures"`

	raw hf.Fields // config.json keys in file order, with their original bytes
}

// DefaultConfig returns HF T5Config() defaults (t5-small shapes, vocab 32128).
func DefaultConfig() Config {
	return Config{
		VocabSize: 32128, DModel: 512, DKV: 64, DFF: 2048, NumLayers: 6, NumDecoderLayers: 6, NumHeads: 8,
		RelativeAttentionNumBuckets: 32, RelativeAttentionMaxDistance: 128,
		DropoutRate: 0.1, LayerNormEpsilon: 1e-6, InitializerFactor: 1.0,
		FeedForwardProj: "relu", TieWordEmbeddings: true, IsEncoderDecoder: true, UseCache: true,
		PadTokenID: 0, EOSTokenID: 1, DecoderStartTokenID: 0,
		ModelType: "t5", Architectures: []string{"T5ForConditionalGeneration"},
	}
}

// TinyConfig is a test-sized Flan-style model (d_model 64, d_kv 16, 4 heads,
// d_ff 160 gated-gelu, 2+2 layers, untied), the shape of the t5-flan-tiny fixture.
func TinyConfig(vocab int) Config {
	c := DefaultConfig()
	c.VocabSize, c.DModel, c.DKV, c.DFF, c.NumLayers, c.NumDecoderLayers, c.NumHeads = vocab, 64, 16, 160, 2, 2, 4
	c.FeedForwardProj, c.TieWordEmbeddings = "gated-gelu", false
	return c
}

// MiniConfig: d_model 256, d_ff 1024 gated-gelu, 4+4 layers, 4 heads, d_kv 64, untied.
func MiniConfig(vocab int) Config {
	c := DefaultConfig()
	c.VocabSize, c.DModel, c.DKV, c.DFF, c.NumLayers, c.NumDecoderLayers, c.NumHeads = vocab, 256, 64, 1024, 4, 4, 4
	c.FeedForwardProj, c.TieWordEmbeddings = "gated-gelu", false
	return c
}

// SmallConfig: d_model 512, d_ff 1024 gated-gelu, 8+8 layers, 6 heads, d_kv 64, untied
// (google/t5-v1_1-small / flan-t5-small shapes).
func SmallConfig(vocab int) Config {
	c := DefaultConfig()
	c.VocabSize, c.DModel, c.DKV, c.DFF, c.NumLayers, c.NumDecoderLayers, c.NumHeads = vocab, 512, 64, 1024, 8, 8, 6
	c.FeedForwardProj, c.TieWordEmbeddings = "gated-gelu", false
	return c
}

// LargeConfig is google/flan-t5-large: d_model 1024, d_ff 2816 gated-gelu,
// 24+24 layers, 16 heads, d_kv 64, vocab 32128, untied (783M parameters).
func LargeConfig() Config {
	c := DefaultConfig()
	c.DModel, c.DKV, c.DFF, c.NumLayers, c.NumDecoderLayers, c.NumHeads = 1024, 64, 2816, 24, 24, 16
	c.FeedForwardProj, c.TieWordEmbeddings = "gated-gelu", false
	return c
}

// activation returns the FF activation name and whether the FF is gated,
// following HF T5Config: "gated-X" → (X, true), with gated-gelu using gelu_new.
func (c Config) activation() (act string, gated bool, err error) {
	switch c.FeedForwardProj {
	case "relu":
		return "relu", false, nil
	case "gelu":
		return "gelu", false, nil // exact erf GELU (ACT2FN["gelu"])
	case "gated-gelu":
		return "gelu_new", true, nil // tanh approximation (HF special case)
	case "gated-relu":
		return "relu", true, nil
	}
	return "", false, fmt.Errorf("field %q: unknown value %q (want relu, gelu, gated-gelu or gated-relu)",
		"feed_forward_proj", c.FeedForwardProj)
}

// Validate checks that every size is positive and feed_forward_proj is known.
func (c Config) Validate() error {
	pos := []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"d_model", c.DModel}, {"d_kv", c.DKV}, {"d_ff", c.DFF},
		{"num_layers", c.NumLayers}, {"num_decoder_layers", c.NumDecoderLayers}, {"num_heads", c.NumHeads},
		{"relative_attention_num_buckets", c.RelativeAttentionNumBuckets},
		{"relative_attention_max_distance", c.RelativeAttentionMaxDistance},
	}
	for _, p := range pos {
		if p.v <= 0 {
			return fmt.Errorf("field %q: must be > 0, got %d", p.name, p.v)
		}
	}
	if c.RelativeAttentionNumBuckets < 4 {
		return fmt.Errorf("field %q: must be >= 4, got %d", "relative_attention_num_buckets", c.RelativeAttentionNumBuckets)
	}
	if c.LayerNormEpsilon <= 0 {
		return fmt.Errorf("field %q: must be > 0, got %g", "layer_norm_epsilon", c.LayerNormEpsilon)
	}
	if c.DropoutRate < 0 || c.DropoutRate >= 1 {
		return fmt.Errorf("field %q: must be in [0,1), got %g", "dropout_rate", c.DropoutRate)
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"pad_token_id", c.PadTokenID}, {"eos_token_id", c.EOSTokenID}, {"decoder_start_token_id", c.DecoderStartTokenID}} {
		if p.v < 0 || p.v >= c.VocabSize {
			return fmt.Errorf("field %q: %d outside vocabulary [0,%d)", p.name, p.v, c.VocabSize)
		}
	}
	_, _, err := c.activation()
	return err
}

// ModelTypes are the HF model_type values this package loads: T5 and
// Flan-T5 ("t5"), mT5 ("mt5"), the same architecture.
var ModelTypes = []string{"t5", "mt5"}

// LoadConfig reads dir/config.json (HF T5Config), applying HF defaults for
// missing keys (num_decoder_layers missing or null → num_layers), and validates
// it. Errors name the file and the field.
func LoadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, ConfigFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("load config: %w", err)
	}
	// Positioned errors for an empty file or broken JSON before the field checks.
	var probe map[string]json.RawMessage
	if err := hf.DecodeJSON(path, b, &probe); err != nil {
		return Config{}, fmt.Errorf("load config: %w", err)
	}
	c, err := parseConfig(b)
	if err != nil {
		return Config{}, fmt.Errorf("load config %s: %w", path, err)
	}
	return c, nil
}

func parseConfig(b []byte) (Config, error) {
	raw, err := hf.ParseFields(b)
	if err != nil {
		return Config{}, err
	}
	c := DefaultConfig()
	c.NumDecoderLayers = -1
	c.Architectures = nil
	c.ModelType = "" // a file must name its family itself (checked below)
	if err := json.Unmarshal(b, &c); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Config{}, fmt.Errorf("field %q: %w", te.Field, err)
		}
		return Config{}, err
	}
	if c.NumDecoderLayers == -1 { // missing or null
		c.NumDecoderLayers = c.NumLayers
	}
	// Another architecture's config would load as a T5 of made-up sizes,
	// and so would one that does not say what it is.
	if c.ModelType == "" {
		return Config{}, fmt.Errorf("field %q: missing, null or empty; every HF config.json names its family: add \"model_type\": \"t5\" if this is a T5 (\"mt5\" for mT5)", "model_type")
	}
	if !slices.Contains(ModelTypes, c.ModelType) {
		return Config{}, fmt.Errorf("field %q: %q is not a T5 model (want one of %v)", "model_type", c.ModelType, ModelTypes)
	}
	c.raw = raw
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// knownFields lists the modelled keys in HF's usual order with current values,
// plus the derived dense_act_fn / is_gated_act that HF T5Config also writes.
func (c Config) knownFields() hf.Fields {
	act, gated, _ := c.activation()
	kv := []struct {
		k string
		v any
	}{
		{"architectures", c.Architectures}, {"d_ff", c.DFF}, {"d_kv", c.DKV}, {"d_model", c.DModel},
		{"decoder_start_token_id", c.DecoderStartTokenID}, {"dense_act_fn", act}, {"dropout_rate", c.DropoutRate},
		{"eos_token_id", c.EOSTokenID}, {"feed_forward_proj", c.FeedForwardProj},
		{"initializer_factor", c.InitializerFactor}, {"is_encoder_decoder", c.IsEncoderDecoder},
		{"is_gated_act", gated}, {"layer_norm_epsilon", c.LayerNormEpsilon}, {"model_type", c.ModelType},
		{"num_decoder_layers", c.NumDecoderLayers}, {"num_heads", c.NumHeads}, {"num_layers", c.NumLayers},
		{"pad_token_id", c.PadTokenID}, {"relative_attention_max_distance", c.RelativeAttentionMaxDistance},
		{"relative_attention_num_buckets", c.RelativeAttentionNumBuckets},
		{"tie_word_embeddings", c.TieWordEmbeddings}, {"use_cache", c.UseCache}, {"vocab_size", c.VocabSize},
	}
	out := make(hf.Fields, 0, len(kv))
	for _, e := range kv {
		if e.k == "architectures" && e.v.([]string) == nil {
			continue
		}
		out = append(out, hf.Field{Key: e.k, Value: encodePy(e.v)})
	}
	return out
}

// encodePy encodes a value the way Python's json module does (floats keep a
// ".0" or exponent, e.g. 1e-06), so rewritten keys look like HF's.
func encodePy(v any) json.RawMessage {
	switch x := v.(type) {
	case float64:
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if i := strings.IndexByte(s, 'e'); i >= 0 {
			mant, exp := s[:i], s[i+1:]
			sign := exp[0]
			digits := strings.TrimLeft(exp[1:], "0")
			if len(digits) < 2 {
				digits = strings.Repeat("0", 2-len(digits)) + digits
			}
			s = mant + "e" + string(sign) + digits
		} else if !strings.ContainsAny(s, ".") && !math.IsInf(x, 0) && !math.IsNaN(x) {
			s += ".0"
		}
		return json.RawMessage(s)
	default:
		b, _ := json.Marshal(v)
		return b
	}
}

// MarshalConfig returns the config.json bytes Save writes: the keys of the
// loaded file in their order (values re-encoded only when they changed), then
// modelled keys absent from the file, indented by two spaces, with a final
// newline (Python json.dumps(indent=2) layout).
func (c Config) MarshalConfig() ([]byte, error) {
	known := c.knownFields()
	idx := map[string]int{}
	for i, f := range known {
		idx[f.Key] = i
	}
	used := map[string]bool{}
	var fields hf.Fields
	for _, f := range c.raw {
		v := f.Value
		if i, ok := idx[f.Key]; ok {
			used[f.Key] = true
			if f.Key == "num_decoder_layers" && string(bytes.TrimSpace(v)) == "null" && c.NumDecoderLayers == c.NumLayers {
				// keep null
			} else if !hf.SameJSON(v, known[i].Value) {
				v = known[i].Value
			}
		}
		fields = append(fields, hf.Field{Key: f.Key, Value: v})
	}
	for _, f := range known {
		if !used[f.Key] {
			fields = append(fields, f)
		}
	}
	return fields.Marshal()
}

// Extra returns the raw JSON of a config.json key this struct does not
// model (e.g. ragforge's "ragforge_init"), and whether the file had it.
func (c Config) Extra(key string) (json.RawMessage, bool) { return c.raw.Get(key) }

// SetExtra sets an unmodelled config.json key to the JSON encoding of v,
// in place when the key exists, else as the last key; Save writes it.
// Errors: key names a modelled field, or v does not encode.
func (c *Config) SetExtra(key string, v any) error {
	for _, f := range c.knownFields() {
		if f.Key == key {
			return fmt.Errorf("t5 config: %q is a modelled field, not an extra one", key)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("t5 config: field %q: %w", key, err)
	}
	c.raw.SetRaw(key, b) // never writes a shared array: Config is copied by value
	return nil
}

// DeleteExtra removes an unmodelled config.json key and reports whether it
// was there (e.g. a filter's calibration, which training invalidates).
func (c *Config) DeleteExtra(key string) bool { return c.raw.Delete(key) }
