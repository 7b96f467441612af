package bpe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/ragforge/ragforge/models/tokenizer/internal/addedtokens"
)

// AddTokens adds tokens as HF add_tokens does (not special, normalized) and
// returns their ids; a token already present keeps its id. Not safe for use
// concurrent with encoding.
func (t *Tokenizer) AddTokens(toks []string) []int {
	return t.addTokens(toks, false)
}

// AddSpecialTokens adds special tokens (not normalized, dropped by
// skip_special_tokens decoding) and returns their ids.
func (t *Tokenizer) AddSpecialTokens(toks []string) []int {
	return t.addTokens(toks, true)
}

func (t *Tokenizer) addTokens(toks []string, special bool) []int {
	ids := make([]int, len(toks))
	added := slices.Clone(t.added)
	next := t.Len()
	seen := map[string]int{}
	for i, s := range toks {
		if id, ok := t.TokenToID(s); ok {
			ids[i] = id
			continue
		}
		if id, ok := seen[s]; ok {
			ids[i] = id
			continue
		}
		added = append(added, addedtokens.Pattern{ID: next, Entry: addedtokens.Entry{Content: s, Normalized: !special, Special: special}})
		ids[i], seen[s] = next, next
		next++
	}
	t.setAdded(added)
	return ids
}

// Save writes tokenizer.json (the file read, with the added tokens now
// present) and tokenizer_config.json (the file read, or one naming the
// special tokens, with added_tokens_decoder) to dir.
func (t *Tokenizer) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save bpe tokenizer: %w", err)
	}
	type entry struct {
		ID int `json:"id"`
		addedtokens.Entry
	}
	list := make([]entry, len(t.added))
	dec := make(map[string]addedtokens.Entry, len(t.added))
	for i, a := range t.added {
		list[i] = entry{a.ID, a.Entry}
		dec[strconv.Itoa(a.ID)] = a.Entry
	}
	doc := make(map[string]json.RawMessage, len(t.json))
	for k, v := range t.json {
		doc[k] = v
	}
	var err error
	if doc["added_tokens"], err = marshal(list); err != nil {
		return fmt.Errorf("save bpe tokenizer: %w", err)
	}
	cfg := make(map[string]json.RawMessage, len(t.rawC)+1)
	for k, v := range t.rawC {
		cfg[k] = v
	}
	if cfg["added_tokens_decoder"], err = marshal(dec); err != nil {
		return fmt.Errorf("save bpe tokenizer: %w", err)
	}
	if t.rawC == nil {
		cfg["tokenizer_class"] = json.RawMessage(`"PreTrainedTokenizerFast"`)
	}
	for name, v := range map[string]any{TokenizerFile: doc, ConfigFile: cfg} {
		b, err := marshal(v)
		if err != nil {
			return fmt.Errorf("save bpe tokenizer: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("save bpe tokenizer: %w", err)
		}
	}
	return nil
}

// marshal writes JSON as HF does: no HTML escaping, indented, so "<|im_start|>"
// stays readable.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
