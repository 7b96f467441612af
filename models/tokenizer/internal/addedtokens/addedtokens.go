// Package addedtokens reads and describes the tokens a Hugging Face
// tokenizer appends after its base vocabulary (HF add_tokens /
// add_special_tokens), as saved by PreTrainedTokenizer.save_pretrained. It
// serves the slow-tokenizer loaders in models/tokenizer/sentencepiece (T5)
// and models/tokenizer/wordpiece (BERT).
package addedtokens

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// File names in an HF tokenizer directory.
const (
	ConfigFile = "tokenizer_config.json" // added_tokens_decoder (transformers >= 4.34)
	VocabFile  = "added_tokens.json"     // {content: id}, the older form
)

// Entry is one value of tokenizer_config.json added_tokens_decoder (HF
// tokenizers AddedToken.__getstate__), keyed there by the decimal token id.
type Entry struct {
	Content    string `json:"content"`
	LStrip     bool   `json:"lstrip"`
	Normalized bool   `json:"normalized"`
	RStrip     bool   `json:"rstrip"`
	SingleWord bool   `json:"single_word"`
	Special    bool   `json:"special"`
}

// Token is an added token read by Read.
type Token struct {
	ID      int
	Content string
	Special bool // from added_tokens_decoder; always false from added_tokens.json
}

// Read returns the added tokens of the HF tokenizer directory dir whose ids
// are >= base (the size of the base vocabulary, for T5 including the
// sentinels), sorted by id. Following HF from_pretrained, they come from the
// added_tokens_decoder field of tokenizer_config.json; when that file is
// missing or lists no id >= base, from added_tokens.json ({content: id},
// Special false). Neither file present gives no tokens and no error.
//
// Errors name the file and, where one is at fault, the field and key: a file
// that cannot be read (other than missing), malformed JSON, a decoder key
// that is not a decimal integer, or ids that do not run base, base+1, … with
// no gap (the callers give token i the id base+i).
func Read(dir string, base int) ([]Token, error) {
	var toks []Token
	cfgPath := filepath.Join(dir, ConfigFile)
	buf, err := os.ReadFile(cfgPath)
	switch {
	case err == nil:
		var cfg struct {
			Decoder map[string]Entry `json:"added_tokens_decoder"`
		}
		if err := json.Unmarshal(buf, &cfg); err != nil {
			return nil, fmt.Errorf("load %s: %w", cfgPath, err)
		}
		for key, e := range cfg.Decoder {
			id, err := strconv.Atoi(key)
			if err != nil {
				return nil, fmt.Errorf("load %s: field %q: key %q: %w", cfgPath, "added_tokens_decoder", key, err)
			}
			if id >= base {
				toks = append(toks, Token{id, e.Content, e.Special})
			}
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("load added tokens: %w", err)
	}
	src := cfgPath
	if toks == nil {
		src = filepath.Join(dir, VocabFile)
		buf, err := os.ReadFile(src)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("load added tokens: %w", err)
		}
		if err == nil {
			var vocab map[string]int
			if err := json.Unmarshal(buf, &vocab); err != nil {
				return nil, fmt.Errorf("load %s: %w", src, err)
			}
			for content, id := range vocab {
				if id >= base {
					toks = append(toks, Token{id, content, false})
				}
			}
		}
	}
	slices.SortFunc(toks, func(a, b Token) int { return a.ID - b.ID })
	for i, tok := range toks {
		if tok.ID != base+i {
			return nil, fmt.Errorf("load %s: added token %q has id %d, want %d (ids must follow the base vocabulary contiguously)", src, tok.Content, tok.ID, base+i)
		}
	}
	return toks, nil
}
