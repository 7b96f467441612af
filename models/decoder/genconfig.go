package decoder

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ragforge/ragforge/models/hf"
)

// GenerationConfigFile is where transformers' GenerationConfig lives.
const GenerationConfigFile = "generation_config.json"

// GenerationConfig is the part of HF GenerationConfig that generation reads
// from generation_config.json. Defaults (DefaultGenerationConfig) are
// GenerationConfig()'s: greedy, temperature 1, top_p 1, top_k 50.
type GenerationConfig struct {
	// EOSTokenIDs: eos_token_id (int or list; Qwen2-Instruct lists
	// <|im_end|> and <|endoftext|>). nil when the file has none: the model
	// config's eos ids apply.
	EOSTokenIDs []int
	// PadTokenID: -1 when absent.
	PadTokenID  int
	DoSample    bool    `json:"do_sample"`
	Temperature float64 `json:"temperature"`
	TopP        float64 `json:"top_p"`
	TopK        int     `json:"top_k"`
	// MaxNewTokens: 0 when absent.
	MaxNewTokens int `json:"max_new_tokens"`
}

// DefaultGenerationConfig returns HF GenerationConfig() defaults.
func DefaultGenerationConfig() GenerationConfig {
	return GenerationConfig{PadTokenID: -1, Temperature: 1, TopP: 1, TopK: 50}
}

// LoadGenerationConfig reads dir/generation_config.json when present (ok
// reports whether it was); otherwise it returns the defaults. Errors name
// the file and the field.
func LoadGenerationConfig(dir string) (gc GenerationConfig, ok bool, err error) {
	gc = DefaultGenerationConfig()
	path := filepath.Join(dir, GenerationConfigFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return gc, false, nil
	}
	if err != nil {
		return gc, false, fmt.Errorf("load generation config: %w", err)
	}
	var probe map[string]json.RawMessage
	if err := hf.DecodeJSON(path, b, &probe); err != nil {
		return gc, false, fmt.Errorf("load generation config: %w", err)
	}
	// null values keep the defaults (HF writes e.g. "top_k": null).
	for k, v := range probe {
		if string(v) == "null" {
			delete(probe, k)
		}
	}
	clean, _ := json.Marshal(probe)
	if err := json.Unmarshal(clean, &gc); err != nil {
		return gc, false, fmt.Errorf("load generation config %s: %w", path, err)
	}
	if raw, ok := probe["eos_token_id"]; ok {
		if gc.EOSTokenIDs, err = idList(raw); err != nil {
			return gc, false, fmt.Errorf("load generation config %s: field %q: %w", path, "eos_token_id", err)
		}
	}
	if raw, ok := probe["pad_token_id"]; ok {
		if gc.PadTokenID, err = optionalID(raw); err != nil {
			return gc, false, fmt.Errorf("load generation config %s: field %q: %w", path, "pad_token_id", err)
		}
	}
	if gc.Temperature < 0 || gc.TopP < 0 || gc.TopP > 1 || gc.TopK < 0 {
		return gc, false, fmt.Errorf("load generation config %s: temperature %g, top_p %g, top_k %d: want temperature ≥ 0, top_p in [0,1], top_k ≥ 0",
			path, gc.Temperature, gc.TopP, gc.TopK)
	}
	return gc, true, nil
}
