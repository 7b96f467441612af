// Package inspect describes a Hugging Face model directory without building
// the model: architecture, parameter count, dtypes, tokenizer and added
// tokens (ragforge models inspect).
package inspect

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

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
	Tokenizer     string         `json:"tokenizer"`     // tokenizer.File: "spiece.model", "sentencepiece.bpe.model", "vocab.txt", "tokenizer.json" or ""
	TokenizerLen  int            `json:"tokenizer_len"` // len(tokenizer) incl. added tokens
	AddedTokens   map[string]int `json:"added_tokens"`  // e.g. [HELPFUL] → 32100
	Config        map[string]any `json:"config"`        // config.json as read
	WeightsBytes  int64          `json:"weights_bytes"` // size of the weight files
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
	if info.Tokenizer = tokenizer.File(dir); info.Tokenizer != "" {
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
