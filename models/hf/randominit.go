package hf

import (
	"encoding/json"
	"fmt"
	"path/filepath"
)

// RandomInitKey is the config.json key that marks a checkpoint whose weights
// were drawn at random (`ragforge models init`) rather than pretrained.
// transformers keeps unknown config keys as attributes, so the file stays
// loadable there; a config without the key is a pretrained checkpoint.
const RandomInitKey = "ragforge_random_init"

// InitKey is the config.json key that describes a structured random
// initialisation `ragforge models init` applied on top of HF's (a JSON
// object of its settings, e.g. the T5 token-match heads). Like
// RandomInitKey it is kept by transformers as an attribute.
const InitKey = "ragforge_init"

// MarkRandomInit adds `"ragforge_random_init": true` as the last key of
// dir/config.json (AddConfigKey).
func MarkRandomInit(dir string) error {
	if err := AddConfigKey(dir, RandomInitKey, true); err != nil {
		return fmt.Errorf("hf: mark random init: %w", err)
	}
	return nil
}

// AddConfigKey adds key with the JSON encoding of value as the last key of
// dir/config.json through EditConfig, keeping every other key's bytes (key
// order and number formatting as the model's Save wrote them). A key
// already holding an equal value is left as is. The write is atomic.
// Errors: a missing or unreadable file, a top level that is not an object,
// the key already set to another value, a value JSON cannot encode.
func AddConfigKey(dir, key string, value any) error {
	enc, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("%s: field %q: %w", filepath.Join(dir, ConfigName), key, err)
	}
	return EditConfig(dir, func(fs *Fields) error {
		if old, ok := fs.Get(key); ok {
			if SameJSON(old, enc) {
				return nil
			}
			return fmt.Errorf("field %q already set to %s", key, old)
		}
		fs.SetRaw(key, enc)
		return nil
	})
}

// IsRandomInit reports whether dir/config.json carries
// `"ragforge_random_init": true`. A config without the key (any Hugging
// Face checkpoint) is not random. Errors: an unreadable config, or the key
// with a non-boolean value.
func IsRandomInit(dir string) (bool, error) {
	m, err := ReadRawConfig(dir)
	if err != nil {
		return false, err
	}
	v, ok := m[RandomInitKey]
	if !ok {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("hf: %s: field %q: %v, want true or false", filepath.Join(dir, ConfigName), RandomInitKey, v)
	}
	return b, nil
}
