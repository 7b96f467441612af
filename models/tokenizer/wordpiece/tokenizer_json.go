package wordpiece

import (
	"fmt"

	"github.com/ragforge/ragforge/models/tokenizer/internal/addedtokens"
	"github.com/ragforge/ragforge/models/tokenizer/internal/postprocess"
)

// TokenizerJSONFile is the HF tokenizers file a fast tokenizer loads.
const TokenizerJSONFile = "tokenizer.json"

// TokenizerJSON returns the tokenizer.json that transformers' BertConverter
// (convert_slow_tokenizer.py) writes for t, so BertTokenizerFast and
// transformers.js load the directory without vocab.txt:
//
//   - normalizer: BertNormalizer(clean_text, handle_chinese_chars,
//     strip_accents, lowercase) from the config;
//   - pre_tokenizer: BertPreTokenizer;
//   - model: WordPiece over the vocabulary (id = line), unk_token,
//     continuing_subword_prefix, max_input_chars_per_word;
//   - post_processor: TemplateProcessing [CLS] $A [SEP] (pair:
//     [CLS] $A [SEP] $B:1 [SEP]:1);
//   - decoder: WordPiece(prefix, cleanup);
//   - added_tokens: the special tokens of the config and the added tokens.
func (t *Tokenizer) TokenizerJSON() ([]byte, error) {
	c := t.cfg
	var added []addedtokens.Pattern
	for id, tok := range t.vocab {
		switch tok {
		case c.PadToken, c.UnkToken, c.ClsToken, c.SepToken, c.MaskToken:
			if t.ids[tok] == id {
				added = append(added, addedtokens.Pattern{ID: id, Entry: addedtokens.Entry{Content: tok, Special: true}})
			}
		}
	}
	for i, a := range t.added {
		added = append(added, addedtokens.Pattern{ID: len(t.vocab) + i, Entry: addedtokens.Entry{Content: a.Content, Normalized: !a.Special, Special: a.Special}})
	}
	vocab := make(map[string]int, len(t.vocab))
	for tok, id := range t.ids {
		vocab[tok] = id
	}
	var strip any // null: follow lowercase, as HF strip_accents=None
	if c.StripAccents != nil {
		strip = *c.StripAccents
	}
	cls := postprocess.Special{Token: c.ClsToken, ID: t.ClsID()}
	sep := postprocess.Special{Token: c.SepToken, ID: t.EOSID()}
	doc := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": added,
		"normalizer": map[string]any{"type": "BertNormalizer", "clean_text": true,
			"handle_chinese_chars": c.TokenizeChineseChars, "strip_accents": strip, "lowercase": c.DoLowerCase},
		"pre_tokenizer":  map[string]any{"type": "BertPreTokenizer"},
		"post_processor": postprocess.TemplateJSON([]postprocess.Special{cls}, []postprocess.Special{sep}, nil, 1),
		"decoder":        map[string]any{"type": "WordPiece", "prefix": c.ContinuingPrefix, "cleanup": true},
		"model": map[string]any{"type": "WordPiece", "unk_token": c.UnkToken, "continuing_subword_prefix": c.ContinuingPrefix,
			"max_input_chars_per_word": c.MaxInputCharsPerWord, "vocab": vocab},
	}
	buf, err := addedtokens.MarshalJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	return buf, nil
}
