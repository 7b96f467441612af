package wordpiece

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
)

type bertCase struct {
	Text        string   `json:"text"`
	BasicTokens []string `json:"basic_tokens"`
	Tokens      []string `json:"tokens"`
	IDs         []int    `json:"ids"`
}

func loadBert(t testing.TB) (*Tokenizer, []bertCase, string) {
	t.Helper()
	dir := testutil.SharedPath(t, "fixtures/bert-tiny")
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []bertCase `json:"tokenizer_cases"`
	}
	if err := json.Unmarshal(buf, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) != 9 {
		t.Fatalf("fixture has %d tokenizer_cases, want 9", len(doc.Cases))
	}
	return tok, doc.Cases, dir
}

func TestBertFixtureCases(t *testing.T) {
	tok, cases, _ := loadBert(t)
	if tok.Len() != 1500 || tok.PadID() != 0 || tok.ClsID() != 2 || tok.EOSID() != 3 {
		t.Fatalf("Len, PAD, CLS, SEP = %d %d %d %d; want 1500 0 2 3", tok.Len(), tok.PadID(), tok.ClsID(), tok.EOSID())
	}
	for _, c := range cases {
		basic := tok.BasicTokenize(c.Text)
		if !slices.Equal(basic, c.BasicTokens) {
			t.Errorf("BasicTokenize(%q)\n got %q\nwant %q", c.Text, basic, c.BasicTokens)
		}
		toks := append(append([]string{"[CLS]"}, tok.Tokenize(c.Text)...), "[SEP]")
		if !slices.Equal(toks, c.Tokens) {
			t.Errorf("Tokenize(%q)\n got %q\nwant %q", c.Text, toks, c.Tokens)
		}
		if ids := tok.Encode(c.Text, true); !slices.Equal(ids, c.IDs) {
			t.Errorf("Encode(%q)\n got %v\nwant %v", c.Text, ids, c.IDs)
		}
	}
}

func TestWordPieceRules(t *testing.T) {
	vocab := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "a", "##b"}
	tok, err := New(vocab, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	long := make([]rune, 101)
	for i := range long {
		long[i] = 'a'
	}
	tests := []struct {
		word string
		want []string
	}{
		{"unaffable", []string{"un", "##aff", "##able"}},
		{"ab", []string{"a", "##b"}},
		{"abx", []string{"[UNK]"}}, // uncoverable word → one [UNK]
		{"x", []string{"[UNK]"}},
		{string(long), []string{"[UNK]"}}, // > 100 chars
	}
	for _, tc := range tests {
		if got := tok.WordPiece(tc.word); !slices.Equal(got, tc.want) {
			t.Errorf("WordPiece(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
}

func TestBasicTokenizeRules(t *testing.T) {
	tok, err := New([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in   string
		want []string
	}{
		{"Olá,\u00a0Mundo!", []string{"ola", ",", "mundo", "!"}},       // NBSP is Zs
		{"a\x00b\ufffdc\u200bd", []string{"abcd"}},                     // NUL, U+FFFD, Cf dropped
		{"e\u0301", []string{"e"}},                                     // combining accent stripped
		{"5$+x^`|~", []string{"5", "$", "+", "x", "^", "`", "|", "~"}}, // ASCII symbol ranges
		{"中文", []string{"中", "文"}},
		{"ÉCOLE", []string{"ecole"}},
	}
	for _, tc := range tests {
		if got := tok.BasicTokenize(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("BasicTokenize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	no := false
	cfg := DefaultConfig()
	cfg.DoLowerCase = false
	cfg.StripAccents = &no
	cased, _ := New([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}, cfg)
	if got := cased.BasicTokenize("Água"); !slices.Equal(got, []string{"Água"}) {
		t.Errorf("cased BasicTokenize = %q, want [Água]", got)
	}
}

func TestPairAndSpecial(t *testing.T) {
	tok, _, _ := loadBert(t)
	// "azul" = 205, "de" = 132 (fixture ids).
	ids, types := tok.EncodePair("azul", "de azul")
	if want := []int{2, 205, 3, 132, 205, 3}; !slices.Equal(ids, want) {
		t.Errorf("EncodePair ids = %v, want %v", ids, want)
	}
	if want := []int{0, 0, 0, 1, 1, 1}; !slices.Equal(types, want) {
		t.Errorf("EncodePair types = %v, want %v", types, want)
	}
	// Special tokens in the text are never split.
	if got := tok.Encode("azul [SEP] [MASK]de", false); !slices.Equal(got, []int{205, 3, 4, 132}) {
		t.Errorf("Encode with literal specials = %v, want [205 3 4 132]", got)
	}
	if got := tok.AddTokens([]string{"[HELPFUL]", "[NOT_HELPFUL]", "azul"}); !slices.Equal(got, []int{1500, 1501, 205}) {
		t.Fatalf("AddTokens = %v, want [1500 1501 205]", got)
	}
	if got := tok.Encode("[HELPFUL] azul [NOT_HELPFUL]", true); !slices.Equal(got, []int{2, 1500, 205, 1501, 3}) {
		t.Errorf("Encode with added tokens = %v", got)
	}
	// Decode: "d ##i ##f" joins; specials dropped or kept.
	ids = []int{2, 41, 102, 99, 205, 1500, 3, 0}
	if got := tok.Decode(ids, true); got != "dif azul [HELPFUL]" {
		t.Errorf("Decode(skip) = %q", got)
	}
	if got := tok.Decode(ids, false); got != "[CLS] dif azul [HELPFUL] [SEP] [PAD]" {
		t.Errorf("Decode(keep) = %q", got)
	}
}

func TestSaveLoad(t *testing.T) {
	tok, cases, _ := loadBert(t)
	tok.AddTokens([]string{"[HELPFUL]", "[NOT_HELPFUL]"})
	dir := t.TempDir()
	if err := tok.Save(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Len() != 1502 || !slices.Equal(back.Added(), tok.Added()) {
		t.Fatalf("reloaded Len %d added %v", back.Len(), back.Added())
	}
	for _, c := range cases {
		if a, b := tok.Encode(c.Text, true), back.Encode(c.Text, true); !slices.Equal(a, b) {
			t.Errorf("%q: reloaded %v, want %v", c.Text, b, a)
		}
	}
	os.Remove(filepath.Join(dir, "tokenizer_config.json"))
	back, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := back.TokenToID("[NOT_HELPFUL]"); !ok || id != 1501 {
		t.Errorf("from added_tokens.json: [NOT_HELPFUL] = %d, %v", id, ok)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); err == nil {
		t.Error("Load(empty dir) succeeded")
	}
	os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte("[PAD]\n[UNK]\n[CLS]\n"), 0o644)
	if _, err := Load(dir); err == nil {
		t.Error("Load(vocab without [SEP]) succeeded")
	}
	os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte("[PAD]\n[UNK]\n[CLS]\n[SEP]\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"added_tokens_decoder": {"7": {"content": "x"}}}`), 0o644)
	if _, err := Load(dir); err == nil {
		t.Error("Load(gap in added ids) succeeded")
	}
}
