package addedtokens

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ragforge/ragforge/internal/atomicfile"
)

// MarshalJSON writes v as HF tokenizers and transformers do: indented, with
// '<', '>' and '&' kept (special tokens stay readable).
func MarshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// TokenizerJSON returns the nodes of doc with added_tokens replaced by added.
func TokenizerJSON(doc map[string]json.RawMessage, added []Pattern) ([]byte, error) {
	doc = maps.Clone(doc)
	if doc == nil {
		doc = map[string]json.RawMessage{}
	}
	var err error
	if doc["added_tokens"], err = MarshalJSON(added); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	return MarshalJSON(doc)
}

// SaveTokenizerJSON writes dir/tokenizer.json, the nodes of doc with
// added_tokens replaced by added, and dir/tokenizer_config.json, the fields
// of cfg (nil: a new file naming tokenizerClass) with added_tokens_decoder
// replaced by added; so a tokenizer read from tokenizer.json saves what it
// read plus the tokens added since.
func SaveTokenizerJSON(dir string, doc, cfg map[string]json.RawMessage, added []Pattern, tokenizerClass string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save tokenizer.json: %w", err)
	}
	dec := make(map[string]Entry, len(added))
	for _, a := range added {
		dec[strconv.Itoa(a.ID)] = a.Entry
	}
	newCfg := maps.Clone(cfg)
	if newCfg == nil {
		newCfg = map[string]json.RawMessage{"tokenizer_class": json.RawMessage(strconv.Quote(tokenizerClass))}
	}
	var err error
	if newCfg["added_tokens_decoder"], err = MarshalJSON(dec); err != nil {
		return fmt.Errorf("save %s: %w", ConfigFile, err)
	}
	tj, err := TokenizerJSON(doc, added)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, "tokenizer.json"), tj, 0o644); err != nil {
		return fmt.Errorf("save tokenizer: %w", err)
	}
	b, err := MarshalJSON(newCfg)
	if err != nil {
		return fmt.Errorf("save %s: %w", ConfigFile, err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, ConfigFile), b, 0o644); err != nil {
		return fmt.Errorf("save tokenizer: %w", err)
	}
	return nil
}
