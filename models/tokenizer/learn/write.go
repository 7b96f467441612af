package learn

import (
	"errors"
	"fmt"

	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
	"github.com/ragforge/ragforge/models/tokenizer/wordpiece"
)

// WriteT5Dir saves m as an HF T5Tokenizer directory (created if needed):
// spiece.model, special_tokens_map.json, tokenizer_config.json and
// added_tokens.json with sentencepiece.DefaultExtraIDs (100) sentinels, as
// sentencepiece.NewT5(m, 100).Save writes them. tokenizer.Load(dir) reads it
// back; its Len() is m.Size()+100.
func WriteT5Dir(dir string, m *sentencepiece.Model) error {
	if m == nil {
		return errors.New("write t5 tokenizer: nil model")
	}
	if err := sentencepiece.NewT5(m, sentencepiece.DefaultExtraIDs).Save(dir); err != nil {
		return fmt.Errorf("write t5 tokenizer %s: %w", dir, err)
	}
	return nil
}

// WriteBERTDir saves vocab (id = line) as an HF BertTokenizer directory
// (created if needed): vocab.txt, tokenizer_config.json (do_lower_case =
// lowercase, the value the vocabulary was trained with), special_tokens_map.json
// and added_tokens.json. The vocabulary must hold [PAD], [UNK], [CLS] and
// [SEP]. tokenizer.Load(dir) reads it back.
func WriteBERTDir(dir string, vocab []string, lowercase bool) error {
	t, err := wordpiece.New(vocab, BERTConfig(lowercase))
	if err != nil {
		return fmt.Errorf("write bert tokenizer %s: %w", dir, err)
	}
	if err := t.Save(dir); err != nil {
		return fmt.Errorf("write bert tokenizer %s: %w", dir, err)
	}
	return nil
}
