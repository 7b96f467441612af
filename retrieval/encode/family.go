package encode

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"

	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/nn"
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
	return LoadModelWithTokenizerAs(dir, backendName, nn.Float32)
}

// LoadModelWithTokenizerAs is LoadModelWithTokenizer holding the weights
// as dt (bert.LoadAs; nn.Auto keeps a BF16 checkpoint in bfloat16).
func LoadModelWithTokenizerAs(dir, backendName string, dt nn.DType) (*bert.Model, tokenizer.Tokenizer, error) {
	a, err := Arch(dir)
	if err != nil {
		return nil, nil, err
	}
	if a.ModelType == xlmr.ModelType {
		return xlmr.LoadWithTokenizerAs(dir, backendName, dt)
	}
	return bert.LoadWithTokenizerAs(dir, backendName, a, dt)
}
