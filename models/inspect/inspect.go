// Package inspect describes a Hugging Face model directory without building
// the model: architecture, parameter count, dtypes, tokenizer and added
// tokens (ragforge models inspect).
package inspect

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/safetensors"
	"github.com/ragforge/ragforge/models/tokenizer"
)

// Info summarises a model directory.
type Info struct {
	Dir           string         `json:"dir"`
	ModelType     string         `json:"model_type"`
	Architectures []any          `json:"architectures,omitempty"`
	Parameters    int64          `json:"parameters"`    // elements over all tensors
	Tensors       int            `json:"tensors"`       // tensors in the safetensors file(s)
	DTypes        map[string]int `json:"dtypes"`        // dtype → tensor count
	Tokenizer     string         `json:"tokenizer"`     // "spiece.model", "vocab.txt", "tokenizer.json" or ""
	TokenizerLen  int            `json:"tokenizer_len"` // len(tokenizer) incl. added tokens
	AddedTokens   map[string]int `json:"added_tokens"`  // e.g. [HELPFUL] → 32100
	Config        map[string]any `json:"config"`        // config.json as read
	WeightsBytes  int64          `json:"weights_bytes"` // size of the weight files
	// Decoder summarises a decoder-only LM (model_type in models/decoder.Families).
	Decoder *Decoder `json:"decoder,omitempty"`
}

// Decoder is the shape of a Llama/Qwen2/Qwen3 checkpoint as models/decoder
// reads it (defaults applied), and whether ragforge can run it.
type Decoder struct {
	Layers           int     `json:"num_hidden_layers"`
	Hidden           int     `json:"hidden_size"`
	Intermediate     int     `json:"intermediate_size"`
	Heads            int     `json:"num_attention_heads"`
	KVHeads          int     `json:"num_key_value_heads"`
	HeadDim          int     `json:"head_dim"`
	Vocab            int     `json:"vocab_size"`
	Context          int     `json:"max_position_embeddings"`
	RopeTheta        float64 `json:"rope_theta"`
	Tied             bool    `json:"tie_word_embeddings"`
	EOSTokenIDs      []int   `json:"eos_token_ids"`
	ConfigParameters int64   `json:"config_parameters"` // parameters config.json implies
	GenerationConfig bool    `json:"generation_config"` // generation_config.json present
	// Unsupported says why models/decoder refuses the directory (a
	// rope_scaling kind, sliding window, a tensor that does not match); ""
	// when it loads.
	Unsupported string `json:"unsupported,omitempty"`
}

// Labels RAG² adds to the filter's tokenizer; reported when present.
var knownAdded = []string{"[HELPFUL]", "[NOT_HELPFUL]"}

// Dir inspects dir. Errors name the file that could not be read.
func Dir(dir string) (*Info, error) {
	cfg, err := hf.ReadRawConfig(dir)
	if err != nil {
		return nil, err
	}
	mt, err := hf.ModelType(dir)
	if err != nil {
		return nil, err
	}
	info := &Info{Dir: dir, ModelType: mt, Config: cfg, DTypes: map[string]int{}, AddedTokens: map[string]int{}}
	if a, ok := cfg["architectures"].([]any); ok {
		info.Architectures = a
	}
	ts, err := safetensors.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	if _, ok := decoder.Families[mt]; ok {
		info.Decoder = describeDecoder(dir, ts)
	}
	for _, t := range ts {
		info.Tensors++
		info.Parameters += int64(t.NumElements())
		info.DTypes[string(t.DType)]++
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil {
			info.WeightsBytes += st.Size()
		}
	}
	for _, name := range []string{"spiece.model", "vocab.txt", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			info.Tokenizer = name
			break
		}
	}
	if info.Tokenizer != "" {
		tok, err := tokenizer.Load(dir)
		if err != nil {
			return nil, fmt.Errorf("inspect %s: tokenizer: %w", dir, err)
		}
		info.TokenizerLen = tok.Len()
		for _, name := range knownAdded {
			if id, ok := tok.TokenToID(name); ok {
				info.AddedTokens[name] = id
			}
		}
	}
	return info, nil
}

// SortedDTypes returns the dtype names in order.
func (i *Info) SortedDTypes() []string {
	var out []string
	for k := range i.DTypes {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// describeDecoder reads dir's config as models/decoder does and checks the
// tensors against it without building the model.
func describeDecoder(dir string, ts map[string]*safetensors.Tensor) *Decoder {
	c, err := decoder.LoadConfig(dir)
	if err != nil {
		return &Decoder{Unsupported: err.Error()}
	}
	d := &Decoder{Layers: c.NumHiddenLayers, Hidden: c.HiddenSize, Intermediate: c.IntermediateSize,
		Heads: c.NumAttentionHeads, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, Vocab: c.VocabSize,
		Context: c.MaxPositionEmbeddings, RopeTheta: c.RopeTheta, Tied: c.TieWordEmbeddings,
		EOSTokenIDs: c.EOSTokenIDs, ConfigParameters: c.Parameters()}
	gc, ok, err := decoder.LoadGenerationConfig(dir)
	switch {
	case err != nil:
		d.Unsupported = err.Error()
	case ok:
		d.GenerationConfig = true
		if gc.EOSTokenIDs != nil {
			d.EOSTokenIDs = gc.EOSTokenIDs
		}
	}
	if err := c.CheckTensors(ts, filepath.Join(dir, decoder.WeightsFile)); err != nil && d.Unsupported == "" {
		d.Unsupported = err.Error()
	}
	return d
}
