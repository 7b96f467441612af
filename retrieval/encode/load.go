package encode

import (
	"fmt"
	"path/filepath"

	"github.com/gomlx/gomlx/backends"

	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/models/xlmr"
)

// Arch is the BERT-family architecture of the encoder directory dir, from
// its config.json model_type (hf.ModelType): bert.BERT for "bert",
// xlmr.Arch for "xlm-roberta" (bge-m3, multilingual-e5). Any other family
// is refused by name: it is no bi-encoder this package runs.
func Arch(dir string) (bert.Arch, error) {
	mt, err := hf.ModelType(dir)
	if err != nil {
		return bert.Arch{}, fmt.Errorf("encoder %s: %w", dir, err)
	}
	switch mt {
	case bert.BERT.ModelType:
		return bert.BERT, nil
	case xlmr.ModelType:
		return xlmr.Arch, nil
	}
	return bert.Arch{}, fmt.Errorf("encoder %s: config.json model_type %q is not a supported bi-encoder (BERT family: want %q or %q)",
		dir, mt, bert.BERT.ModelType, xlmr.ModelType)
}

// LoadConfig reads and validates dir/config.json for its BERT-family
// architecture (Arch), without the weights.
func LoadConfig(dir string) (bert.Config, error) {
	a, err := Arch(dir)
	if err != nil {
		return bert.Config{}, err
	}
	return bert.LoadConfigFor(dir, a)
}

// LoadModel loads the BERT-family encoder in dir on be, dispatching on its
// model_type (Arch): bert.Load or xlmr.Load. Errors name dir.
func LoadModel(be backends.Backend, dir string) (*bert.Model, error) {
	a, err := Arch(dir)
	if err != nil {
		return nil, err
	}
	return bert.LoadFor(be, dir, a)
}

// LoadModelWithTokenizer is LoadModel on the named backend ("" = default)
// plus dir's tokenizer (tokenizer.LoadFor): a tokenizer with more ids than
// config.json's vocab_size is refused, naming both files. For XLM-R the
// tokenizer's pad id must be pad_token_id, from which positions count.
func LoadModelWithTokenizer(dir, backendName string) (*bert.Model, tokenizer.Tokenizer, error) {
	a, err := Arch(dir)
	if err != nil {
		return nil, nil, err
	}
	if a.ModelType == xlmr.ModelType {
		return xlmr.LoadWithTokenizer(dir, backendName)
	}
	return bert.LoadWithTokenizer(dir, backendName)
}

// LoadBERT loads the bi-encoder of an HF model directory (config.json,
// model.safetensors, tokenizer files; a BERT or, by model_type, an XLM-R
// such as bge-m3 or multilingual-e5: LoadModelWithTokenizer) on the named
// GoMLX backend ("" = default) with NewBERTEncoder's BGE defaults, named
// after the directory's base name. pooling is "cls" (BGE, bge-m3 dense,
// MedCPT), "mean" (sentence-transformers, mE5) or "" (what dir declares,
// DirPooling). Errors name dir: an unsupported model_type, backend, weights
// and tokenizer failures, a tokenizer with more tokens than the model's
// vocab_size (tokenizer.LoadFor), an unknown pooling (bert.ParsePooling:
// bge-m3's sparse and colbert modes refused by name).
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
