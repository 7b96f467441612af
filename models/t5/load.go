package t5

import (
	"fmt"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/tokenizer"
)

// LoadWithTokenizer loads an HF T5 / Flan-T5 directory (Load: config.json
// and model.safetensors) and its tokenizer (spiece.model or
// tokenizer.json) on the named GoMLX backend ("" = default,
// models/backend). Errors: the backend's, Load's, and the tokenizer's,
// including a tokenizer with more tokens than the model's vocab_size
// (tokenizer.LoadFor: those ids would have no embedding row); they name dir.
func LoadWithTokenizer(dir, backendName string) (*Model, tokenizer.Tokenizer, error) {
	return LoadWithTokenizerAs(dir, backendName, nn.Float32)
}

// LoadWithTokenizerAs is LoadWithTokenizer holding the weights as dt
// (LoadAs): nn.Auto for inference keeps a BF16 checkpoint in bfloat16.
func LoadWithTokenizerAs(dir, backendName string, dt nn.DType) (*Model, tokenizer.Tokenizer, error) {
	be, err := backend.New(backendName)
	if err != nil {
		return nil, nil, err
	}
	m, err := LoadAs(be, dir, dt)
	if err != nil {
		return nil, nil, fmt.Errorf("load t5 %s: %w", dir, err)
	}
	tok, err := tokenizer.LoadFor(dir, m.Config.VocabSize)
	if err != nil {
		return nil, nil, fmt.Errorf("load t5 %s: %w", dir, err)
	}
	return m, tok, nil
}
