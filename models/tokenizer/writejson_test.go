package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
	"github.com/ragforge/ragforge/models/tokenizer/wordpiece"
)

// exported is one tokenizer written as tokenizer.json alone, with its
// source and the texts both must encode alike.
type exported struct {
	name   string
	dir    string // holds tokenizer.json (and tokenizer_config.json), nothing else
	source Tokenizer
	texts  []string
}

// bertTexts are the bert-tiny fixture's tokenizer texts plus an added label.
func bertTexts(t *testing.T, dir string) []string {
	buf, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		Cases []struct{ Text string } `json:"tokenizer_cases"`
	}
	if err := json.Unmarshal(buf, &exp); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, c := range exp.Cases {
		texts = append(texts, c.Text)
	}
	return append(texts, "Azul [HELPFUL] de toluidina")
}

// spTexts are the SentencePiece fixture texts without the literal special
// tokens, which the raw model keeps as text but a tokenizer.json splits out.
func spTexts(t *testing.T, dir string) []string {
	var texts []string
	for _, c := range spCases(t, dir) {
		if !strings.Contains(c.Text, "</s>") && !strings.Contains(c.Text, "<pad>") && !strings.Contains(c.Text, "<extra_id_") {
			texts = append(texts, c.Text)
		}
	}
	return texts
}

// writeOnlyJSON writes tok's tokenizer.json (and a tokenizer_config.json
// naming its class) into a fresh directory.
func writeOnlyJSON(t *testing.T, tok Tokenizer, class string) string {
	t.Helper()
	dir := t.TempDir()
	if err := WriteJSON(dir, tok); err != nil {
		t.Fatal(err)
	}
	cfg := `{"tokenizer_class": "` + class + `"}`
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// xlmrStyle is the fixture SentencePiece model with a <s> control piece
// appended (it has none), framed <s> … </s> as XLM-R.
func xlmrStyle(t *testing.T, dir string) *sentencepiece.T5 {
	t.Helper()
	m, err := sentencepiece.Load(filepath.Join(dir, "spiece.model"))
	if err != nil {
		t.Fatal(err)
	}
	pieces := append(slices.Clone(m.Pieces()), sentencepiece.Piece{Piece: "<s>", Type: sentencepiece.Control})
	ts := m.Trainer()
	ts.BOSID, ts.VocabSize = int32(len(pieces)-1), int32(len(pieces))
	m2, err := sentencepiece.New(pieces, ts, m.Normalizer())
	if err != nil {
		t.Fatal(err)
	}
	return sentencepiece.NewT5(m2, 0)
}

// xlmrJSON writes x as tokenizer.json with <s> $A </s> framing.
func xlmrJSON(t *testing.T, x *sentencepiece.T5) string {
	t.Helper()
	buf, err := x.TokenizerJSONFramed(sentencepiece.FrameBOSEOS)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := `{"tokenizer_class": "XLMRobertaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}`
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// exports writes the tokenizer.json kinds ragforge exports: BERT
// (WordPiece, with an added label token), T5 (Unigram, eos appended, labels),
// a T5 model framed <s> … </s>, and XLM-R's from sentencepiece.bpe.model
// (compared with XLMRobertaTokenizer's slow ids).
func exports(t *testing.T) []exported {
	bertDir := testutil.SharedPath(t, "fixtures/bert-tiny")
	spDir := testutil.SharedPath(t, "fixtures/tokenizer")
	bert, err := wordpiece.Load(bertDir)
	if err != nil {
		t.Fatal(err)
	}
	bert.AddTokens([]string{"[HELPFUL]"})
	t5, err := sentencepiece.LoadT5(spDir)
	if err != nil {
		t.Fatal(err)
	}
	t5.AddTokens([]string{"[HELPFUL]", "[NOT_HELPFUL]"})
	x := xlmrStyle(t, spDir)
	t5Texts := append(spTexts(t, spDir), "[HELPFUL] azul [NOT_HELPFUL]", "<extra_id_0> formol")
	xDir, xm := xlmrSPM(t)
	xtok, err := Load(xDir)
	if err != nil {
		t.Fatal(err)
	}
	return []exported{
		{"bert", writeOnlyJSON(t, bert, "BertTokenizer"), bert, bertTexts(t, bertDir)},
		{"t5", writeOnlyJSON(t, t5, "T5Tokenizer"), t5, t5Texts},
		{"xlmr", xlmrJSON(t, x), x, spTexts(t, spDir)},
		{"xlmr-spm", writeOnlyJSON(t, xtok, "XLMRobertaTokenizer"), xlmrSlow{xtok, xm}, spTexts(t, spDir)},
	}
}

// Every exported tokenizer.json, read back by Load from a directory that
// holds nothing else, gives its source tokenizer's ids on the fixture texts.
func TestWrittenTokenizerJSONReadsBack(t *testing.T) {
	for _, e := range exports(t) {
		back, err := Load(e.dir)
		if err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		if back.Len() != e.source.Len() {
			t.Errorf("%s: Len %d, source %d", e.name, back.Len(), e.source.Len())
		}
		for _, text := range e.texts {
			want := e.source.Encode(text, true)
			if e.name == "xlmr" { // the source is a T5 without sentinels: frame it as XLM-R
				want = append([]int{e.source.Len() - 1}, append(e.source.Encode(text, false), 1)...)
			}
			if got := back.Encode(text, true); !slices.Equal(got, want) {
				t.Errorf("%s %q: ids %v, source %v", e.name, text, got, want)
			}
		}
	}
}

// XLM-R's <s> A </s></s> B </s> pair and RobertaProcessing (the older files).
func TestUnigramRobertaFraming(t *testing.T) {
	spDir := testutil.SharedPath(t, "fixtures/tokenizer")
	x := xlmrStyle(t, spDir)
	dir := xlmrJSON(t, x)
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := tok.(*sentencepiece.Fast)
	if !ok {
		t.Fatalf("Load = %T, want *sentencepiece.Fast", tok)
	}
	a, b := x.Encode("azul de toluidina", false), x.Encode("formol", false)
	bos := x.Len() - 1
	wantPair := slices.Concat([]int{bos}, a, []int{1, 1}, b, []int{1})
	if ids, types := f.EncodePair("azul de toluidina", "formol"); !slices.Equal(ids, wantPair) || slices.Max(types) != 0 {
		t.Errorf("pair %v types %v, want %v all 0", ids, types, wantPair)
	}
	if got := f.Decode(f.Encode("azul  de toluidina", true), true); got != "azul de toluidina" {
		t.Errorf("decode %q", got)
	}
	if f.EOSID() != 1 || f.PadID() != 0 {
		t.Errorf("eos %d pad %d, want 1 0", f.EOSID(), f.PadID())
	}
	// The same file with RobertaProcessing gives the same ids.
	buf, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	json.Unmarshal(buf, &doc)
	doc["post_processor"] = json.RawMessage(`{"type": "RobertaProcessing", "sep": ["</s>", 1], "cls": ["<s>", 2000], "trim_offsets": true, "add_prefix_space": true}`)
	rob, err := LoadJSON(writeJSON(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rob.Encode("azul de toluidina", true), f.Encode("azul de toluidina", true); !slices.Equal(got, want) {
		t.Errorf("RobertaProcessing %v, TemplateProcessing %v", got, want)
	}
	if ids, _ := rob.EncodePair("azul de toluidina", "formol"); !slices.Equal(ids, wantPair) {
		t.Errorf("RobertaProcessing pair %v, want %v", ids, wantPair)
	}
}

// Unigram files with parts this reader does not implement are refused by name.
func TestUnigramRefused(t *testing.T) {
	base := map[string]any{"model": map[string]any{"type": "Unigram", "unk_id": 0, "vocab": [][]any{{"<unk>", 0.0}, {"▁a", -1.0}}},
		"post_processor": map[string]any{"type": "ByteLevel"}}
	for _, tt := range []struct {
		field string
		node  any
		want  string
	}{
		{"normalizer", map[string]any{"type": "Lowercase"}, `"Lowercase"`},
		{"normalizer", map[string]any{"type": "Replace", "pattern": map[string]any{"String": "a"}, "content": "b"}, "Replace"},
		{"pre_tokenizer", map[string]any{"type": "ByteLevel"}, `"ByteLevel"`},
		{"pre_tokenizer", map[string]any{"type": "Metaspace", "replacement": "_"}, `"_"`},
	} {
		doc := map[string]any{tt.field: tt.node}
		for k, v := range base {
			doc[k] = v
		}
		_, err := LoadJSON(writeJSON(t, doc))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %v: error %v, want one naming %s", tt.field, tt.node, err, tt.want)
		}
	}
}

// An NFKC normalizer node (no charsmap) is applied before the Viterbi.
func TestUnigramNFKC(t *testing.T) {
	doc := map[string]any{
		"model":          map[string]any{"type": "Unigram", "unk_id": 0, "vocab": [][]any{{"<unk>", 0.0}, {"▁fi", -1.0}, {"▁", -2.0}, {"f", -3.0}, {"i", -3.0}}},
		"pre_tokenizer":  map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"},
		"post_processor": map[string]any{"type": "ByteLevel"},
	}
	for _, tt := range []struct {
		norm any
		want []int
	}{
		{nil, []int{2, 0}}, // "ﬁ" unknown
		{map[string]any{"type": "NFKC"}, []int{1}},
		{map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFKC"}}}, []int{1}},
	} {
		doc["normalizer"] = tt.norm
		tok, err := LoadJSON(writeJSON(t, doc))
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Encode("ﬁ", true); !slices.Equal(got, tt.want) {
			t.Errorf("normalizer %v: %v, want %v", tt.norm, got, tt.want)
		}
	}
}
