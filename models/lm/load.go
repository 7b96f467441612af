package lm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/nn"
)

// Families maps an HF config.json model_type to the backend that loads it
// as a language model. The decoder families come from models/decoder's
// registry; a new architecture family is one line here (or none, when it
// joins an existing registry).
func Families() map[string]func(dir, backendName string, dt nn.DType) (LM, error) {
	out := map[string]func(string, string, nn.DType) (LM, error){
		"t5": func(dir, be string, dt nn.DType) (LM, error) { return LoadT5As(dir, be, dt) },
	}
	for _, mt := range decoder.ModelTypes() {
		out[mt] = func(dir, be string, dt nn.DType) (LM, error) { return LoadDecoderAs(dir, be, dt) }
	}
	return out
}

// Load opens an HF model directory as a language model by its config.json
// model_type (hf.ModelType). Errors: an unreadable config, a model_type no
// family takes (named, with the supported ones), the loader's. The model
// generates and scores only, so its weights are held as stored (nn.Auto:
// a BF16 checkpoint stays bfloat16); LoadAs chooses.
func Load(dir, backendName string) (LM, error) { return LoadAs(dir, backendName, nn.Auto) }

// LoadAs is Load holding the weights as dt (nn.DType).
func LoadAs(dir, backendName string, dt nn.DType) (LM, error) {
	mt, err := hf.ModelType(dir)
	if err != nil {
		return nil, err
	}
	fams := Families()
	load, ok := fams[mt]
	if !ok {
		names := make([]string, 0, len(fams))
		for k := range fams {
			names = append(names, k)
		}
		return nil, fmt.Errorf("language model %s: model_type %q is not supported (supported: %s)", dir, mt, strings.Join(slices.Sorted(slices.Values(names)), ", "))
	}
	return load(dir, backendName, dt)
}
