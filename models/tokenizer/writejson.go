package tokenizer

import (
	"fmt"
	"path/filepath"

	"github.com/ragforge/ragforge/internal/atomicfile"
)

// JSONFile is the HF fast-tokenizer file (tokenizers, transformers.js).
const JSONFile = "tokenizer.json"

// JSONWriter is a tokenizer that describes itself as an HF tokenizer.json
// (sentencepiece.T5, wordpiece.Tokenizer, bpe.Tokenizer, sentencepiece.Fast).
type JSONWriter interface {
	TokenizerJSON() ([]byte, error)
}

// WriteJSON writes dir/tokenizer.json for tok, so exported models load in
// AutoTokenizer and transformers.js without converting vocab.txt or
// spiece.model. Errors: a tokenizer that cannot be written as tokenizer.json,
// or I/O.
func WriteJSON(dir string, tok Tokenizer) error {
	w, ok := tok.(JSONWriter)
	if !ok {
		return fmt.Errorf("write %s: %T cannot be written as tokenizer.json", filepath.Join(dir, JSONFile), tok)
	}
	buf, err := w.TokenizerJSON()
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, JSONFile), err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, JSONFile), buf, 0o644); err != nil {
		return fmt.Errorf("write tokenizer: %w", err)
	}
	return nil
}
