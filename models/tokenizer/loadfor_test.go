package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadForRefusesATokenizerLargerThanTheModel(t *testing.T) {
	dir := t.TempDir()
	vocab := "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n"
	os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte(vocab), 0o644)
	for _, tc := range []struct {
		vocabSize int
		want      string
	}{
		{7, ""},
		{8, ""}, // padded embeddings are fine
		{6, "7 tokens (with added tokens), more than the model's vocab_size 6"},
	} {
		_, err := LoadFor(dir, tc.vocabSize)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("vocab_size %d: %v", tc.vocabSize, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), filepath.Join(dir, "vocab.txt"))):
			t.Errorf("vocab_size %d: error %v, want one naming vocab.txt and %q", tc.vocabSize, err, tc.want)
		}
	}
}
