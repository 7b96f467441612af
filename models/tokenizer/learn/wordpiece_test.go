package learn

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/models/tokenizer/wordpiece"
)

func TestTrainWordPieceHand(t *testing.T) {
	specials := strings.Join(BERTSpecials, " ")
	f := false
	for _, tc := range []struct {
		name  string
		texts []string
		opt   WordPieceOptions
		want  string
	}{
		// Words ab×3, abc×1. Characters a 4, b 4, c 1. Pairs (a,##b) 4,
		// (##b,##c) 1: merge a+##b → ab; then (ab,##c) 1 < MinFreq 2.
		{"minfreq stops", []string{"AB ab ab", "abc"}, WordPieceOptions{}, "a b c ##a ##b ##c ab"},
		// MinFreq 1: ab then ab+##c → abc.
		{"minfreq 1", []string{"ab ab ab", "abc"}, WordPieceOptions{MinFreq: 1}, "a b c ##a ##b ##c ab abc"},
		// VocabSize stops after the first merge.
		{"vocab size", []string{"ab ab ab", "abc"}, WordPieceOptions{MinFreq: 1, VocabSize: 12}, "a b c ##a ##b ##c ab"},
		// Words xy, yx: pairs (x,##y) and (y,##x) tie at 1, broken by the
		// left token: x < y. Then (y,##x) is next.
		{"tie by text", []string{"yx xy"}, WordPieceOptions{MinFreq: 1}, "x y ##x ##y xy yx"},
		// Continuation pairs merge into a ## token: ##b+##c → ##bc.
		// Words abc×2, dbc×2: (a,##b) 2, (##b,##c) 4, (d,##b) 2.
		{"continuation", []string{"abc abc dbc dbc"}, WordPieceOptions{VocabSize: 14}, "b c a d ##b ##c ##a ##d ##bc"},
		// Cased: A and a stay apart; "!" is its own word. Characters a 3,
		// then ! and A (1 each) by code point. Pairs (A,##a) and (a,##a)
		// tie at 1: "A" < "a".
		{"cased", []string{"Aa aa!"}, WordPieceOptions{Lowercase: &f, MinFreq: 1, VocabSize: 14}, "a ! A ##a ##! ##A Aa aa"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := TrainWordPiece(tc.texts, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.Fields(specials + " " + tc.want); !slices.Equal(got, want) {
				t.Errorf("vocab\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestTrainWordPieceErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		texts []string
		opt   WordPieceOptions
		want  string
	}{
		{"no words", []string{" ", "\t"}, WordPieceOptions{}, "no words"},
		{"below specials", []string{"ab"}, WordPieceOptions{VocabSize: 5}, `"VocabSize"`},
		{"below alphabet", []string{"abc"}, WordPieceOptions{VocabSize: 10}, "2×3 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := TrainWordPiece(tc.texts, tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %s", err, tc.want)
			}
		})
	}
}

func TestTrainWordPieceDemo(t *testing.T) {
	texts := demoTexts(t, 0)
	vocab, err := TrainWordPiece(texts, WordPieceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(vocab) > 1500 || len(vocab) < 1000 {
		t.Errorf("%d tokens, want 1000..1500 (default VocabSize 1500)", len(vocab))
	}
	if !slices.Equal(vocab[:5], BERTSpecials) {
		t.Errorf("first tokens %q, want %q", vocab[:5], BERTSpecials)
	}
	seen := map[string]bool{}
	for _, v := range vocab {
		if seen[v] {
			t.Errorf("duplicate token %q", v)
		}
		seen[v] = true
	}
	small, err := TrainWordPiece(texts, WordPieceOptions{VocabSize: 400})
	if err != nil {
		t.Fatal(err)
	}
	if len(small) != 400 || !slices.Equal(small, vocab[:400]) {
		t.Errorf("VocabSize 400: %d tokens, want the first 400 of the 1500 run", len(small))
	}
	again, err := TrainWordPiece(texts, WordPieceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(vocab, again) {
		t.Error("two trainings on the same texts differ")
	}
	dir := t.TempDir()
	if err := WriteBERTDir(dir, vocab, true); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	wp, ok := tok.(*wordpiece.Tokenizer)
	if !ok {
		t.Fatalf("loaded %T, want *wordpiece.Tokenizer", tok)
	}
	if !wp.Config().DoLowerCase || !slices.Equal(wp.Vocab(), vocab) {
		t.Errorf("loaded do_lower_case %v, vocab equal %v", wp.Config().DoLowerCase, slices.Equal(wp.Vocab(), vocab))
	}
	unk, _ := tok.TokenToID("[UNK]")
	if unk != 1 || tok.PadID() != 0 || wp.ClsID() != 2 || tok.EOSID() != 3 {
		t.Errorf("[UNK]/[PAD]/[CLS]/[SEP] = %d/%d/%d/%d, want 1/0/2/3", unk, tok.PadID(), wp.ClsID(), tok.EOSID())
	}
	for i, x := range texts {
		ids := tok.Encode(x, true)
		if slices.Contains(ids, unk) {
			t.Errorf("text %d encodes to [UNK]", i)
		}
		if got, want := tok.Decode(ids, true), strings.Join(wp.BasicTokenize(x), " "); got != want {
			t.Errorf("text %d: decode(encode(x))\n got %q\nwant %q", i, got, want)
		}
	}
	// Every seen character continues a word: a new combination of seen
	// characters has no [UNK].
	if ids := tok.Encode("xqzµ ºxq", false); slices.Contains(ids, unk) {
		t.Errorf("unseen combination of seen characters: %v has [UNK]", ids)
	}
	if err := WriteBERTDir(dir, []string{"a"}, true); err == nil {
		t.Error("vocabulary without specials: no error")
	}
}

// TestBERTSpecialsMatchFixture checks the special ids against bert-tiny's
// vocab.txt, which the BERT retriever's code and checkpoints assume.
func TestBERTSpecialsMatchFixture(t *testing.T) {
	dir := testutil.SharedPath(t, "fixtures/bert-tiny")
	b, err := os.ReadFile(filepath.Join(dir, "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(string(b), "\n")[:5]; !slices.Equal(got, BERTSpecials) {
		t.Errorf("bert-tiny vocab.txt starts %q, want %q", got, BERTSpecials)
	}
}

func BenchmarkTrainWordPieceDemo(b *testing.B) {
	texts := demoTexts(b, 0)
	for b.Loop() {
		if _, err := TrainWordPiece(texts, WordPieceOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
