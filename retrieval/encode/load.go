package encode

import (
	"fmt"
	"path/filepath"

	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/nn"
)

// LoadBERT loads the BERT bi-encoder of an HF model directory (config.json,
// model.safetensors, vocab.txt or tokenizer.json; LoadModelWithTokenizer: BERT
// or XLM-R by model_type) on the named GoMLX backend ("" = default), named
// after the directory's base name and configured as the directory declares
// (DirSettings: pooling, normalize, max_seq_length, prompts; NewBERTEncoder's
// BGE defaults without sentence-transformers files). pooling, when not "",
// overrides the directory's: "cls" (BGE, MedEmbed, MedCPT) or "mean"
// (sentence-transformers). Errors name dir: backend, weights (bert.Load)
// and tokenizer failures, a tokenizer with more tokens than the model's
// vocab_size (tokenizer.LoadFor), malformed settings, an unknown pooling
// (bge-m3's sparse and colbert modes by name).
//
// The weights are held in their stored dtype (nn.Auto: a BF16 checkpoint
// stays bfloat16, half the memory); LoadBERTAs chooses.
func LoadBERT(dir, backendName, pooling string) (*BERTEncoder, error) {
	return LoadBERTAs(dir, backendName, pooling, nn.Auto)
}

// LoadBERTAs is LoadBERT holding the weights as dt (nn.DType, HF's
// torch_dtype; the encoder computes in float32 either way).
func LoadBERTAs(dir, backendName, pooling string, dt nn.DType) (*BERTEncoder, error) {
	s, _, err := DirSettings(dir)
	if err != nil {
		return nil, err
	}
	if pooling != "" {
		s.Pooling = bert.Pooling(pooling)
	}
	if !s.Pooling.Valid() {
		_, err := bert.ParsePooling(string(s.Pooling))
		return nil, err
	}
	m, tok, err := LoadModelWithTokenizerAs(dir, backendName, dt)
	if err != nil {
		return nil, fmt.Errorf("encoder: %w", err)
	}
	enc := NewBERTEncoder(m, tok, filepath.Base(dir))
	enc.Apply(s)
	return enc, nil
}
