package bpe

import (
	"fmt"
	"slices"

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
// present) and tokenizer_config.json (the file read, or a new one, with
// added_tokens_decoder) to dir.
func (t *Tokenizer) Save(dir string) error {
	if err := addedtokens.SaveTokenizerJSON(dir, t.doc, t.rawC, t.added, "PreTrainedTokenizerFast"); err != nil {
		return fmt.Errorf("save bpe tokenizer %s: %w", dir, err)
	}
	return nil
}

// TokenizerJSON returns the tokenizer.json read, with the added tokens now present.
func (t *Tokenizer) TokenizerJSON() ([]byte, error) {
	return addedtokens.TokenizerJSON(t.doc, t.added)
}
