package encode

import (
	"fmt"
	"path/filepath"

	"github.com/ragforge/ragforge/models/bert"
)

// LoadBERT loads the BERT bi-encoder of an HF model directory (config.json,
// model.safetensors, vocab.txt or tokenizer.json; LoadModelWithTokenizer: BERT or XLM-R by model_type)
// on the named GoMLX backend ("" = default) with NewBERTEncoder's BGE defaults, named after
// the directory's base name. pooling is "cls" (BGE, MedEmbed, MedCPT), "mean"
// (sentence-transformers) or "" (what dir declares, DirPooling). Errors name dir: backend, weights
// (bert.Load) and tokenizer failures, a tokenizer with more tokens than the
// model's vocab_size (tokenizer.LoadFor), an unknown pooling (bge-m3's sparse and colbert modes by name).
func LoadBERT(dir, backendName, pooling string) (*BERTEncoder, error) {
	p := bert.Pooling(pooling)
	if pooling == "" {
		var err error
		if p, err = DirPooling(dir); err != nil {
			return nil, err
		}
	}
	if !p.Valid() {
		_, err := bert.ParsePooling(pooling)
		return nil, err
	}
	m, tok, err := LoadModelWithTokenizer(dir, backendName)
	if err != nil {
		return nil, fmt.Errorf("encoder: %w", err)
	}
	enc := NewBERTEncoder(m, tok, filepath.Base(dir))
	enc.Pooling = p
	return enc, nil
}
