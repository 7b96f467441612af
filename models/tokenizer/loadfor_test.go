package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/tokenizer/bpe"
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

// A directory with a byte-level BPE tokenizer.json loads through Load.
func TestLoadBPE(t *testing.T) {
	dir := testutil.SharedPath(t, "fixtures/tokenizer-qwen3")
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tok.(*bpe.Tokenizer); !ok || tok.Len() != 151669 || tok.EOSID() != 151645 {
		t.Fatalf("Load(%s) = %T with %d tokens, eos %d", dir, tok, tok.Len(), tok.EOSID())
	}
	if got := tok.Encode("Fixação em formol", false); len(got) == 0 || tok.Decode(got, false) != "Fixação em formol" {
		t.Errorf("encode/decode: %v → %q", got, tok.Decode(got, false))
	}
	if _, err := LoadFor(dir, 151936); err != nil {
		t.Errorf("LoadFor with Qwen3's vocab_size 151936: %v", err)
	}
}

// noPad is wordTok without a pad token (Llama 3's tokenizer_config.json).
type noPad struct{ wordTok }

func (noPad) PadID() int { return -1 }

func TestEncodeBatchPaddingNeedsAPadToken(t *testing.T) {
	_, err := EncodeBatchErr(noPad{}, []string{"w1", "w1 w2"}, EncodeOptions{Padding: PadLongest})
	if err == nil || !strings.Contains(err.Error(), "no pad token") {
		t.Errorf("padding without a pad token: %v", err)
	}
	if enc, err := EncodeBatchErr(noPad{}, []string{"w1", "w1 w2"}, EncodeOptions{}); err != nil || len(enc[1].IDs) != 4 {
		t.Errorf("no padding: %v %v", enc, err)
	}
}
