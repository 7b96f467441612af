package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
)

// xlmrSPM writes an XLM-R-layout sentencepiece.bpe.model (<unk>, <s>, </s>,
// then pieces) made of the fixture model's pieces 3.. and normalizer, and
// returns its directory and model.
func xlmrSPM(t *testing.T) (string, *sentencepiece.Model) {
	t.Helper()
	src, err := sentencepiece.Load(filepath.Join(testutil.SharedPath(t, "fixtures/tokenizer"), "spiece.model"))
	if err != nil {
		t.Fatal(err)
	}
	pieces := []sentencepiece.Piece{{Piece: "<unk>", Type: sentencepiece.Unknown}, {Piece: "<s>", Type: sentencepiece.Control}, {Piece: "</s>", Type: sentencepiece.Control}}
	pieces = append(pieces, src.Pieces()[3:]...)
	ts := src.Trainer()
	ts.UnkID, ts.BOSID, ts.EOSID, ts.PadID, ts.VocabSize = 0, 1, 2, -1, int32(len(pieces))
	m, err := sentencepiece.New(pieces, ts, src.Normalizer())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, sentencepiece.XLMRFile), m.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// xlmrSlow is XLMRobertaTokenizer (slow) over a SentencePiece model: ids
// are sp ids + fairseq_offset 1, the sp <unk> is 3, framed <s> … </s>.
// Only Encode and Len differ from the embedded tokenizer.
type xlmrSlow struct {
	Tokenizer
	m *sentencepiece.Model
}

func (x xlmrSlow) Encode(text string, addSpecial bool) []int {
	var ids []int
	for _, id := range x.m.EncodeIDs(text) {
		if id == x.m.UnkID() {
			ids = append(ids, 3)
		} else {
			ids = append(ids, id+1)
		}
	}
	if addSpecial {
		ids = append(append([]int{0}, ids...), 2)
	}
	return ids
}

func (x xlmrSlow) Len() int { return x.m.Size() + 2 } // + <pad>, <mask>

// A directory holding only XLM-R's sentencepiece.bpe.model loads as
// XLMRobertaTokenizer's ids (fairseq offset), <mask> with lstrip, and its
// exported tokenizer.json gives the same ids.
func TestXLMRSentencePieceModel(t *testing.T) {
	dir, m := xlmrSPM(t)
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	slow := xlmrSlow{tok, m}
	if tok.Len() != slow.Len() || tok.EOSID() != 2 || tok.PadID() != 1 {
		t.Fatalf("Len %d (want %d), eos %d, pad %d", tok.Len(), slow.Len(), tok.EOSID(), tok.PadID())
	}
	out := t.TempDir()
	if err := WriteJSON(out, tok); err != nil {
		t.Fatal(err)
	}
	exported, err := Load(out)
	if err != nil {
		t.Fatal(err)
	}
	texts := spTexts(t, testutil.SharedPath(t, "fixtures/tokenizer"))
	for _, text := range texts {
		want := slow.Encode(text, true)
		if got := tok.Encode(text, true); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", text, got, want)
		}
		if got := exported.Encode(text, true); !slices.Equal(got, want) {
			t.Errorf("%q: exported tokenizer.json %v, want %v", text, got, want)
		}
	}
	mask, _ := tok.TokenToID("<mask>")
	want := slices.Concat([]int{0}, slow.Encode("azul", false), []int{mask}, slow.Encode(" de", false), []int{2})
	if got := tok.Encode("azul <mask> de", true); mask != m.Size()+1 || !slices.Equal(got, want) {
		t.Errorf("<mask> (id %d): %v, want %v", mask, got, want)
	}
	if got := tok.Decode(tok.Encode("Azul de toluidina", true), true); got != "Azul de toluidina" {
		t.Errorf("decode %q", got)
	}
}
