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

// MarkRandomInit adds `"ragforge_random_init": true` as the last key of
// dir/config.json, keeping every other byte of the file (key order and
// number formatting as the model's Save wrote them). The write is atomic.
// Errors: a missing or unreadable file, a top level that is not an object.
func MarkRandomInit(dir string) error {
	path := filepath.Join(dir, ConfigName)
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("hf: mark random init: %w", err)
	}
	m, err := ReadRawConfig(dir)
	if err != nil {
		return fmt.Errorf("hf: mark random init: %w", err)
	}
	if v, ok := m[RandomInitKey].(bool); ok && v {
		return nil
	}
	if _, ok := m[RandomInitKey]; ok {
		return fmt.Errorf("hf: mark random init: %s: field %q already set to %v", path, RandomInitKey, m[RandomInitKey])
	}
	body := bytes.TrimRight(b, " \t\r\n")
	if len(body) == 0 || body[len(body)-1] != '}' {
		return fmt.Errorf("hf: mark random init: %s: top level is not a JSON object", path)
	}
	body = bytes.TrimRight(body[:len(body)-1], " \t\r\n")
	sep := ","
	if body[len(body)-1] == '{' {
		sep = ""
	}
	out := append(append([]byte{}, body...), []byte(sep+"\n  \""+RandomInitKey+"\": true\n}\n")...)
	if !json.Valid(out) {
		return fmt.Errorf("hf: mark random init: %s: result is not valid JSON", path)
	}
	if err := atomicfile.Write(path, 0o644, func(w io.Writer) error { _, err := w.Write(out); return err }); err != nil {
		return fmt.Errorf("hf: mark random init: %w", err)
	}
	return nil
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
