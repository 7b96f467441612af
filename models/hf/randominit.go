package hf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ragforge/ragforge/internal/atomicfile"
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
// dir/config.json, keeping every other byte of the file (key order and
// number formatting as the model's Save wrote them). A key already holding
// an equal value is left as is. The write is atomic. Errors: a missing or
// unreadable file, a top level that is not an object, the key already set
// to another value, a value JSON cannot encode.
func AddConfigKey(dir, key string, value any) error {
	path := filepath.Join(dir, ConfigName)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	m, err := ReadRawConfig(dir)
	if err != nil {
		return err
	}
	enc, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("%s: field %q: %w", path, key, err)
	}
	if old, ok := m[key]; ok {
		var want any
		_ = json.Unmarshal(enc, &want)
		if fmt.Sprint(old) == fmt.Sprint(want) {
			return nil
		}
		return fmt.Errorf("%s: field %q already set to %v", path, key, old)
	}
	body := bytes.TrimRight(b, " \t\r\n")
	if len(body) == 0 || body[len(body)-1] != '}' {
		return fmt.Errorf("%s: top level is not a JSON object", path)
	}
	body = bytes.TrimRight(body[:len(body)-1], " \t\r\n")
	sep := ","
	if body[len(body)-1] == '{' {
		sep = ""
	}
	out := append(append([]byte{}, body...), []byte(sep+"\n  \""+key+"\": "+string(enc)+"\n}\n")...)
	if !json.Valid(out) {
		return fmt.Errorf("%s: result is not valid JSON", path)
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { _, err := w.Write(out); return err })
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
