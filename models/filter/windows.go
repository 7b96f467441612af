package filter

import (
	"fmt"
	"strings"

	"github.com/ragforge/ragforge/models/tokenizer"
)

// Window is one model input cut from an instruction: Example indexes the
// instruction slice it came from, IDs are token ids ending in </s> (no padding).
type Window struct {
	Example int
	IDs     []int
}

// Windows tokenizes each instruction (surrounding whitespace stripped, as
// RAG²'s preprocess_features_function does) and cuts it as the HF fast
// tokenizer does with truncation=True, max_length=maxLen, stride=stride,
// return_overflowing_tokens=True: window j holds content tokens
// [j·(maxLen−1−stride), j·(maxLen−1−stride) + maxLen−1) plus </s>, until the
// end is reached. Windows come in instruction order, those of one instruction
// consecutive. Errors: invalid lengths (see tokenizer.EncodeOptions.Validate).
func Windows(tok tokenizer.Tokenizer, instructions []string, maxLen, stride int) ([]Window, error) {
	texts := make([]string, len(instructions))
	for i, s := range instructions {
		texts[i] = strings.TrimSpace(s)
	}
	enc, err := tokenizer.EncodeBatchErr(tok, texts, tokenizer.EncodeOptions{
		MaxLength: maxLen, Stride: stride, Truncation: true, ReturnOverflowing: true,
	})
	if err != nil {
		return nil, fmt.Errorf("windows: %w", err)
	}
	out := make([]Window, len(enc))
	for i, e := range enc {
		out[i] = Window{Example: e.OverflowOf, IDs: e.IDs}
	}
	return out, nil
}
