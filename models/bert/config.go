// Package bert implements the BERT encoder (Devlin et al. 2019, "BERT:
// Pre-training of Deep Bidirectional Transformers for Language Understanding")
// in GoMLX, following Hugging Face transformers' BertModel numerics and
// checkpoint names: post-LayerNorm residual blocks, exact erf GELU, absolute
// learned position embeddings, token-type embeddings and a tanh pooler, plus
// the optional BertForSequenceClassification head used by cross-encoders such
// as MedCPT.
//
// Weights live as GoMLX context variables whose scopes mirror the HF names
// ("encoder.layer.0.attention.self.query.weight" is variable "weight" in scope
// "/encoder/layer/0/attention/self/query"), so the graph functions can be
// trained with pkg/ml/train and written back to HF safetensors with Save.
package bert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/ragforge/ragforge/models/hf"
)

// ConfigFile is the HF config file name inside a checkpoint directory.
const ConfigFile = "config.json"

// Config is HF's BertConfig (config.json). Field names and JSON keys follow
// transformers; keys this struct does not know are kept in Extra and written
// back unchanged by MarshalJSON, so Load→Save round-trips a config.
type Config struct {
	ModelType                 string   `json:"model_type"`
	Architectures             []string `json:"architectures,omitempty"`
	VocabSize                 int      `json:"vocab_size"`
	HiddenSize                int      `json:"hidden_size"`
	NumHiddenLayers           int      `json:"num_hidden_layers"`
	NumAttentionHeads         int      `json:"num_attention_heads"`
	IntermediateSize          int      `json:"intermediate_size"`
	HiddenAct                 string   `json:"hidden_act"`
	HiddenDropoutProb         float64  `json:"hidden_dropout_prob"`
	AttentionProbsDropoutProb float64  `json:"attention_probs_dropout_prob"`
	MaxPositionEmbeddings     int      `json:"max_position_embeddings"`
	TypeVocabSize             int      `json:"type_vocab_size"`
	InitializerRange          float64  `json:"initializer_range"`
	LayerNormEps              float64  `json:"layer_norm_eps"`
	PadTokenID                int      `json:"pad_token_id"`
	PositionEmbeddingType     string   `json:"position_embedding_type"`

	// NumLabels is the classifier width. As in HF's PretrainedConfig it is
	// read from "num_labels" or, when absent, from len("id2label"); the HF
	// default is 2. It only matters when the checkpoint has a classifier.
	NumLabels int `json:"-"`

	// Extra holds every config.json key not listed above (e.g. torch_dtype,
	// id2label, transformers_version), verbatim and in file order: edited
	// through hf.Fields, the one config.json editor.
	Extra hf.Fields `json:"-"`
}

// knownKeys are the JSON keys mapped to Config fields, in HF's order.
var knownKeys = []string{
	"architectures", "model_type", "vocab_size", "hidden_size", "num_hidden_layers",
	"num_attention_heads", "intermediate_size", "hidden_act", "hidden_dropout_prob",
	"attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
	"initializer_range", "layer_norm_eps", "pad_token_id", "position_embedding_type",
}

// DefaultConfig returns HF BertConfig's defaults (bert-base-uncased sizes)
// with the given vocabulary size.
func DefaultConfig(vocab int) Config {
	return Config{
		ModelType: "bert", Architectures: []string{"BertModel"},
		VocabSize: vocab, HiddenSize: 768, NumHiddenLayers: 12, NumAttentionHeads: 12,
		IntermediateSize: 3072, HiddenAct: "gelu", HiddenDropoutProb: 0.1,
		AttentionProbsDropoutProb: 0.1, MaxPositionEmbeddings: 512, TypeVocabSize: 2,
		InitializerRange: 0.02, LayerNormEps: 1e-12, PadTokenID: 0,
		PositionEmbeddingType: "absolute", NumLabels: 2,
	}
}

// TinyConfig is Turc et al. (2019) BERT-Tiny-like: hidden 128, 2 layers, 2
// heads, intermediate 512 (google/bert_uncased_L-2_H-128_A-2).
func TinyConfig(vocab int) Config { return sized(vocab, 128, 2, 2, 512) }

// MiniConfig is BERT-Mini: hidden 256, 4 layers, 4 heads, intermediate 1024.
func MiniConfig(vocab int) Config { return sized(vocab, 256, 4, 4, 1024) }

// SmallConfig is BERT-Small: hidden 512, 4 layers, 8 heads, intermediate 2048.
func SmallConfig(vocab int) Config { return sized(vocab, 512, 4, 8, 2048) }

// BGESmallConfig is the shape of BAAI/bge-small-en-v1.5: hidden 384, 12
// layers, 12 heads, intermediate 1536 (33M parameters at vocab 30522).
func BGESmallConfig(vocab int) Config { return sized(vocab, 384, 12, 12, 1536) }

// LargeConfig is BERT-large, the shape of BAAI/bge-large-en-v1.5 (the
// SL-HyDE retriever): hidden 1024, 24 layers, 16 heads, intermediate 4096
// (335M parameters at vocab 30522).
func LargeConfig(vocab int) Config { return sized(vocab, 1024, 24, 16, 4096) }

func sized(vocab, hidden, layers, heads, inter int) Config {
	c := DefaultConfig(vocab)
	c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = hidden, layers, heads, inter
	return c
}

// HeadDim is HiddenSize / NumAttentionHeads (HF attention_head_size).
func (c Config) HeadDim() int { return c.HiddenSize / c.NumAttentionHeads }

// ClassifierDropout is HF's classifier_dropout (kept in Extra) when set,
// else hidden_dropout_prob, as BertForSequenceClassification uses it.
func (c Config) ClassifierDropout() float64 {
	if v, ok := c.Extra.Get("classifier_dropout"); ok {
		var f *float64
		if json.Unmarshal(v, &f) == nil && f != nil {
			return *f
		}
	}
	return c.HiddenDropoutProb
}

// Validate is ValidateFor(BERT).
func (c Config) Validate() error { return c.ValidateFor(BERT) }

// ValidateFor checks the sizes are positive and consistent, that model_type
// is a's (or empty, for BERT), and that the configuration is one this package
// implements (hidden_act "gelu", position_embedding_type "absolute").
func (c Config) ValidateFor(a Arch) error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize},
		{"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"intermediate_size", c.IntermediateSize}, {"max_position_embeddings", c.MaxPositionEmbeddings},
		{"type_vocab_size", c.TypeVocabSize},
	} {
		if f.v <= 0 {
			return fmt.Errorf("%s config: field %q: must be positive, got %d", a.ModelType, f.name, f.v)
		}
	}
	// Another architecture's config would load as a BERT of made-up sizes,
	// and so would one that does not say what it is.
	if c.ModelType == "" {
		return fmt.Errorf("%s config: field %q: missing, null or empty; every HF config.json names its family: add \"model_type\": %q if this is a %s", a.ModelType, "model_type", a.ModelType, a.ModelType)
	}
	if c.ModelType != a.ModelType {
		return fmt.Errorf("%s config: field %q: %q is not a %s model (want %q)", a.ModelType, "model_type", c.ModelType, a.ModelType, a.ModelType)
	}
	if c.HiddenSize%c.NumAttentionHeads != 0 {
		return fmt.Errorf("%s config: field %q: hidden_size %d is not a multiple of num_attention_heads %d", a.ModelType, "num_attention_heads", c.HiddenSize, c.NumAttentionHeads)
	}
	if c.HiddenAct != "gelu" {
		return fmt.Errorf("%s config: field %q: %q not supported (only exact erf \"gelu\")", a.ModelType, "hidden_act", c.HiddenAct)
	}
	if c.PositionEmbeddingType != "" && c.PositionEmbeddingType != "absolute" {
		return fmt.Errorf("%s config: field %q: %q not supported (only \"absolute\")", a.ModelType, "position_embedding_type", c.PositionEmbeddingType)
	}
	if c.PadTokenID < 0 || c.PadTokenID >= c.VocabSize {
		return fmt.Errorf("%s config: field %q: %d outside vocabulary [0,%d)", a.ModelType, "pad_token_id", c.PadTokenID, c.VocabSize)
	}
	if a.MaxLength(c) < 2 {
		return fmt.Errorf("%s config: field %q: %d leaves room for %d tokens (positions start at %d), want at least 2",
			a.ModelType, "max_position_embeddings", c.MaxPositionEmbeddings, a.MaxLength(c), c.MaxPositionEmbeddings-a.MaxLength(c))
	}
	if c.LayerNormEps <= 0 {
		return fmt.Errorf("%s config: field %q: must be positive, got %g", a.ModelType, "layer_norm_eps", c.LayerNormEps)
	}
	return nil
}

// UnmarshalJSON reads an HF config.json. Missing keys take HF BertConfig
// defaults (DefaultConfig); unknown keys go to Extra.
func (c *Config) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	type plain Config
	p := plain(DefaultConfig(0))
	p.Architectures = nil
	p.ModelType = "" // a file must name its family itself (Validate)
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*c = Config(p)
	fields, err := hf.ParseFields(b)
	if err != nil {
		return err
	}
	c.Extra = nil
	for _, f := range fields {
		if !slices.Contains(knownKeys, f.Key) {
			c.Extra = append(c.Extra, f)
		}
	}
	c.NumLabels = 2
	if v, ok := raw["id2label"]; ok && string(v) != "null" {
		var m map[string]any
		if err := json.Unmarshal(v, &m); err != nil {
			return fmt.Errorf("field %q: %w", "id2label", err)
		}
		c.NumLabels = len(m)
	}
	if v, ok := raw["num_labels"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &c.NumLabels); err != nil {
			return fmt.Errorf("field %q: %w", "num_labels", err)
		}
	}
	return nil
}

// MarshalJSON writes the known keys in HF order, then Extra's keys in order.
// When NumLabels disagrees with Extra's id2label (or NumLabels != 2 and there
// is no id2label), id2label/label2id are regenerated as HF does
// ("LABEL_<i>"), so transformers reads the same num_labels back.
func (c Config) MarshalJSON() ([]byte, error) {
	type plain Config
	known, err := json.Marshal(plain(c))
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(known, &fields); err != nil {
		return nil, err
	}
	extra := c.Extra
	if _, ok := extra.Get("num_labels"); ok {
		extra.SetRaw("num_labels", json.RawMessage(strconv.Itoa(c.NumLabels)))
	} else if n, ok := id2labelLen(extra); (ok && n != c.NumLabels) || (!ok && c.NumLabels != 2 && c.NumLabels > 0) {
		id2, l2id := map[string]string{}, map[string]int{}
		for i := 0; i < c.NumLabels; i++ {
			id2[strconv.Itoa(i)] = fmt.Sprintf("LABEL_%d", i)
			l2id[fmt.Sprintf("LABEL_%d", i)] = i
		}
		a, _ := json.Marshal(id2)
		b, _ := json.Marshal(l2id)
		extra.SetRaw("id2label", a)
		extra.SetRaw("label2id", b)
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	write := func(k string, v json.RawMessage) {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(v)
	}
	for _, k := range knownKeys {
		if v, ok := fields[k]; ok {
			write(k, v)
		}
	}
	for _, f := range extra {
		write(f.Key, f.Value)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func id2labelLen(extra hf.Fields) (int, bool) {
	v, ok := extra.Get("id2label")
	if !ok || string(v) == "null" {
		return 0, false
	}
	var m map[string]any
	if json.Unmarshal(v, &m) != nil {
		return 0, false
	}
	return len(m), true
}

// LoadConfig is LoadConfigFor(dir, BERT).
func LoadConfig(dir string) (Config, error) { return LoadConfigFor(dir, BERT) }

// LoadConfigFor reads dir/config.json (HF BertConfig keys, shared by the
// family) and validates it for a (ValidateFor). Errors name the file and,
// for decoding or validation errors, the field.
func LoadConfigFor(dir string, a Arch) (Config, error) {
	var c Config
	if err := hf.ReadConfig(dir, &c); err != nil {
		return Config{}, fmt.Errorf("%s: load config: %w", a.ModelType, err)
	}
	if err := c.ValidateFor(a); err != nil {
		return Config{}, fmt.Errorf("%s: load config %s: %w", a.ModelType, filepath.Join(dir, ConfigFile), err)
	}
	return c, nil
}
