package tokenizer

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
	"github.com/ragforge/ragforge/models/tokenizer/wordpiece"
)

// wordTok is a hand-checkable tokenizer: "wN" → id N, BERT-style framing
// [CLS]=1 … [SEP]=2, [PAD]=0.
type wordTok struct{}

func (wordTok) Encode(text string, addSpecial bool) []int {
	var ids []int
	for _, w := range strings.Fields(text) {
		n, _ := strconv.Atoi(strings.TrimPrefix(w, "w"))
		ids = append(ids, n)
	}
	if addSpecial {
		return wordTok{}.WithSpecial(ids)
	}
	return ids
}
func (wordTok) WithSpecial(ids []int) []int           { return append(append([]int{1}, ids...), 2) }
func (wordTok) EncodePair(a, b string) ([]int, []int) { return nil, nil }
func (wordTok) Decode([]int, bool) string             { return "" }
func (wordTok) TokenToID(string) (int, bool)          { return 0, false }
func (wordTok) IDToToken(int) string                  { return "" }
func (wordTok) Len() int                              { return 100 }
func (wordTok) PadID() int                            { return 0 }
func (wordTok) EOSID() int                            { return 2 }
func (wordTok) AddTokens([]string) []int              { return nil }
func (wordTok) Save(string) error                     { return nil }

func TestEncodeBatchStrideWindows(t *testing.T) {
	texts := []string{"w10 w11 w12 w13 w14 w15 w16 w17 w18 w19", "w5", "w20 w21 w22 w23 w24"}
	opt := EncodeOptions{MaxLength: 6, Stride: 2, Truncation: true, ReturnOverflowing: true, Padding: PadLongest}
	got, err := EncodeBatchErr(wordTok{}, texts, opt)
	if err != nil {
		t.Fatal(err)
	}
	// content length 6-2 = 4, step 4-2 = 2: windows start at 0, 2, 4, 6.
	want := []Encoding{
		{IDs: []int{1, 10, 11, 12, 13, 2}, AttentionMask: []int{1, 1, 1, 1, 1, 1}, OverflowOf: 0},
		{IDs: []int{1, 12, 13, 14, 15, 2}, AttentionMask: []int{1, 1, 1, 1, 1, 1}, OverflowOf: 0},
		{IDs: []int{1, 14, 15, 16, 17, 2}, AttentionMask: []int{1, 1, 1, 1, 1, 1}, OverflowOf: 0},
		{IDs: []int{1, 16, 17, 18, 19, 2}, AttentionMask: []int{1, 1, 1, 1, 1, 1}, OverflowOf: 0},
		{IDs: []int{1, 5, 2, 0, 0, 0}, AttentionMask: []int{1, 1, 1, 0, 0, 0}, OverflowOf: 1},
		{IDs: []int{1, 20, 21, 22, 23, 2}, AttentionMask: []int{1, 1, 1, 1, 1, 1}, OverflowOf: 2},
		{IDs: []int{1, 22, 23, 24, 2, 0}, AttentionMask: []int{1, 1, 1, 1, 1, 0}, OverflowOf: 2},
	}
	for i := range want {
		want[i].TypeIDs = make([]int, 6)
	}
	if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
		t.Errorf("windows\n got %v\nwant %v", g, w)
	}
}

func TestEncodeBatchPadding(t *testing.T) {
	texts := []string{"w7 w8 w9 w10 w11", "w3"}
	tests := []struct {
		name string
		opt  EncodeOptions
		want [][]int
	}{
		{"no padding", EncodeOptions{}, [][]int{{1, 7, 8, 9, 10, 11, 2}, {1, 3, 2}}},
		{"longest", EncodeOptions{Padding: PadLongest}, [][]int{{1, 7, 8, 9, 10, 11, 2}, {1, 3, 2, 0, 0, 0, 0}}},
		{"longest multiple 4", EncodeOptions{Padding: PadLongest, PadToMultiple: 4}, [][]int{{1, 7, 8, 9, 10, 11, 2, 0}, {1, 3, 2, 0, 0, 0, 0, 0}}},
		{"truncate, no overflow", EncodeOptions{MaxLength: 4, Truncation: true}, [][]int{{1, 7, 8, 2}, {1, 3, 2}}},
		{"max_length without truncation", EncodeOptions{MaxLength: 5, Padding: PadMaxLength}, [][]int{{1, 7, 8, 9, 10, 11, 2}, {1, 3, 2, 0, 0}}},
		{"truncate + max_length", EncodeOptions{MaxLength: 5, Truncation: true, Padding: PadMaxLength}, [][]int{{1, 7, 8, 9, 2}, {1, 3, 2, 0, 0}}},
	}
	for _, tc := range tests {
		got := EncodeBatch(wordTok{}, texts, tc.opt)
		var ids [][]int
		for _, e := range got {
			ids = append(ids, e.IDs)
			for k, m := range e.AttentionMask {
				if (m == 1) != (k < len(e.IDs) && (e.IDs[k] != 0)) {
					t.Errorf("%s: mask %v does not match ids %v", tc.name, e.AttentionMask, e.IDs)
					break
				}
			}
		}
		if fmt.Sprint(ids) != fmt.Sprint(tc.want) {
			t.Errorf("%s: ids %v, want %v", tc.name, ids, tc.want)
		}
	}
}

func TestEncodeOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opt  EncodeOptions
		ok   bool
	}{
		{"defaults", EncodeOptions{}, true},
		{"stride = content", EncodeOptions{MaxLength: 6, Stride: 4, Truncation: true, ReturnOverflowing: true}, false},
		{"stride < content", EncodeOptions{MaxLength: 6, Stride: 3, Truncation: true, ReturnOverflowing: true}, true},
		{"no room", EncodeOptions{MaxLength: 2, Truncation: true}, false},
		{"bad padding", EncodeOptions{Padding: "longest_first"}, false},
		{"max_length without MaxLength", EncodeOptions{Padding: PadMaxLength}, false},
		{"negative stride", EncodeOptions{Stride: -1}, false},
	}
	for _, tc := range tests {
		err := tc.opt.Validate(2)
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if _, err2 := EncodeBatchErr(wordTok{}, []string{"w1"}, tc.opt); (err2 == nil) != tc.ok {
			t.Errorf("%s: EncodeBatchErr error = %v, want ok=%v", tc.name, err2, tc.ok)
		}
		if !tc.ok && EncodeBatch(wordTok{}, []string{"w1"}, tc.opt) != nil {
			t.Errorf("%s: EncodeBatch returned rows for invalid options", tc.name)
		}
	}
}

type spCase struct {
	Name       string `json:"name"`
	Text       string `json:"text"`
	IDs        []int  `json:"ids"`
	IDsWithEOS []int  `json:"ids_with_eos"`
}

func spCases(t *testing.T, dir string) []spCase {
	buf, err := os.ReadFile(filepath.Join(dir, "expected_encodings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []spCase `json:"cases"`
	}
	if err := json.Unmarshal(buf, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Cases
}

// The 565-id passage with MaxLength 128, Stride 32: content 127 per window,
// starts 0, 95, 190, 285, 380, 475; each window is the fixture slice + eos.
func TestEncodeBatchT5LongPassage(t *testing.T) {
	dir := testutil.SharedPath(t, "fixtures/tokenizer")
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var c spCase
	for _, x := range spCases(t, dir) {
		if x.Name == "long_passage_300_words" {
			c = x
		}
	}
	if len(c.IDs) != 565 {
		t.Fatalf("long passage has %d ids, want 565", len(c.IDs))
	}
	got, err := EncodeBatchErr(tok, []string{c.Text}, EncodeOptions{MaxLength: 128, Stride: 32, Truncation: true, ReturnOverflowing: true, Padding: PadLongest})
	if err != nil {
		t.Fatal(err)
	}
	starts := []int{0, 95, 190, 285, 380, 475}
	if len(got) != len(starts) {
		t.Fatalf("%d windows, want %d", len(got), len(starts))
	}
	for j, s := range starts {
		end := min(s+127, 565)
		want := append(slices.Clone(c.IDs[s:end]), 1)
		real := got[j].IDs[:len(want)]
		if !slices.Equal(real, want) {
			t.Errorf("window %d: ids %v..., want fixture ids[%d:%d]+eos", j, real[:4], s, end)
		}
		if len(got[j].IDs) != 128 {
			t.Errorf("window %d: length %d, want 128 (padded)", j, len(got[j].IDs))
		}
		if j > 0 && !slices.Equal(got[j-1].IDs[127-32:127], got[j].IDs[:32]) {
			t.Errorf("windows %d and %d do not overlap by 32 tokens", j-1, j)
		}
	}
}

func TestLoadDirs(t *testing.T) {
	spDir := testutil.SharedPath(t, "fixtures/tokenizer")
	bertDir := testutil.SharedPath(t, "fixtures/bert-tiny")
	t5, err := Load(spDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := t5.(*sentencepiece.T5); !ok || t5.Len() != 2100 || t5.EOSID() != 1 || t5.PadID() != 0 {
		t.Errorf("Load(%s) = %T Len %d", spDir, t5, t5.Len())
	}
	bert, err := Load(bertDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := bert.(*wordpiece.Tokenizer); !ok || bert.Len() != 1500 || bert.EOSID() != 3 {
		t.Errorf("Load(%s) = %T Len %d", bertDir, bert, bert.Len())
	}
	empty := t.TempDir()
	if _, err := Load(empty); err == nil || !strings.Contains(err.Error(), empty) {
		t.Errorf("Load(empty) error %v, want one naming %s", err, empty)
	}
}

func TestSaveLoadAddedTokens(t *testing.T) {
	for _, sub := range []string{"tokenizer", "bert-tiny"} {
		tok, err := Load(testutil.SharedPath(t, filepath.Join("fixtures", sub)))
		if err != nil {
			t.Fatal(err)
		}
		n := tok.Len()
		ids := tok.AddTokens([]string{"[HELPFUL]", "[NOT_HELPFUL]"})
		if !slices.Equal(ids, []int{n, n + 1}) {
			t.Errorf("%s: AddTokens = %v, want [%d %d]", sub, ids, n, n+1)
		}
		dir := t.TempDir()
		if err := tok.Save(dir); err != nil {
			t.Fatal(err)
		}
		back, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		text := "[HELPFUL] azul de toluidina [NOT_HELPFUL]"
		if a, b := tok.Encode(text, true), back.Encode(text, true); !slices.Equal(a, b) || !slices.Contains(b, n) || !slices.Contains(b, n+1) {
			t.Errorf("%s: reloaded Encode %v, original %v (want ids %d, %d present)", sub, b, a, n, n+1)
		}
		if back.Len() != n+2 {
			t.Errorf("%s: reloaded Len %d, want %d", sub, back.Len(), n+2)
		}
	}
}

// tokenizer.json files are synthesized from the fixture vocabularies in the
// HF layout (vocab, added_tokens, Precompiled charsmap in base64) and must
// encode the fixture cases exactly as the native files do.
func TestLoadJSONUnigram(t *testing.T) {
	dir := testutil.SharedPath(t, "fixtures/tokenizer")
	m, err := sentencepiece.Load(filepath.Join(dir, "spiece.model"))
	if err != nil {
		t.Fatal(err)
	}
	var vocab [][]any
	var added []map[string]any
	for id, p := range m.Pieces() {
		vocab = append(vocab, []any{p.Piece, p.Score})
		if p.Type != sentencepiece.Normal {
			added = append(added, map[string]any{"id": id, "content": p.Piece, "special": true})
		}
	}
	for k := 99; k >= 0; k-- {
		tok := fmt.Sprintf("<extra_id_%d>", k)
		added = append(added, map[string]any{"id": len(vocab), "content": tok, "special": true})
		vocab = append(vocab, []any{tok, 0.0})
	}
	added = append(added, map[string]any{"id": 2100, "content": "[HELPFUL]", "special": false})
	doc := map[string]any{
		"added_tokens": added,
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Precompiled", "precompiled_charsmap": base64.StdEncoding.EncodeToString(m.Normalizer().PrecompiledCharsmap)},
			map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": " {2,}"}, "content": " "},
		}},
		"pre_tokenizer": map[string]any{"type": "Metaspace", "replacement": "▁", "add_prefix_space": true},
		"model":         map[string]any{"type": "Unigram", "unk_id": 2, "vocab": vocab},
	}
	path := writeJSON(t, doc)
	tok, err := LoadJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Len() != 2101 {
		t.Errorf("Len = %d, want 2101", tok.Len())
	}
	for _, c := range spCases(t, dir) {
		if strings.Contains(c.Text, "</s>") || strings.Contains(c.Text, "<extra_id_") || strings.Contains(c.Text, "[HELPFUL]") {
			continue
		}
		if got := tok.Encode(c.Text, true); !slices.Equal(got, c.IDsWithEOS) {
			t.Errorf("%s: %v, want %v", c.Name, got, c.IDsWithEOS)
		}
	}
	if got := tok.Encode("[HELPFUL] <extra_id_0>", true); !slices.Equal(got, []int{2100, 2099, 1}) {
		t.Errorf("added/sentinel: %v, want [2100 2099 1]", got)
	}
}

func TestLoadJSONWordPiece(t *testing.T) {
	dir := testutil.SharedPath(t, "fixtures/bert-tiny")
	vocab, err := wordpiece.ReadVocab(filepath.Join(dir, "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	vm := map[string]int{}
	for i, v := range vocab {
		vm[v] = i
	}
	doc := map[string]any{
		"added_tokens": []any{map[string]any{"id": 1500, "content": "[HELPFUL]", "special": false}},
		"normalizer":   map[string]any{"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": nil, "lowercase": true},
		"model":        map[string]any{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100, "vocab": vm},
	}
	tok, err := LoadJSON(writeJSON(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	buf, _ := os.ReadFile(filepath.Join(dir, "expected.json"))
	var exp struct {
		Cases []struct {
			Text string `json:"text"`
			IDs  []int  `json:"ids"`
		} `json:"tokenizer_cases"`
	}
	if err := json.Unmarshal(buf, &exp); err != nil {
		t.Fatal(err)
	}
	for _, c := range exp.Cases {
		if strings.Contains(c.Text, "[HELPFUL]") {
			continue
		}
		if got := tok.Encode(c.Text, true); !slices.Equal(got, c.IDs) {
			t.Errorf("%q: %v, want %v", c.Text, got, c.IDs)
		}
	}
	if got := tok.Encode("[HELPFUL]", false); !slices.Equal(got, []int{1500}) {
		t.Errorf("[HELPFUL] = %v, want [1500]", got)
	}
}

func TestLoadJSONErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  map[string]any
	}{
		{"bpe", map[string]any{"model": map[string]any{"type": "BPE"}}},
		{"no unk", map[string]any{"model": map[string]any{"type": "Unigram", "vocab": [][]any{{"a", -1.0}}}}},
		{"sentinel order", map[string]any{"model": map[string]any{"type": "Unigram", "unk_id": 0, "vocab": [][]any{{"<unk>", 0.0}, {"<extra_id_0>", 0.0}, {"<extra_id_1>", 0.0}}}}},
		{"wordpiece ids", map[string]any{"model": map[string]any{"type": "WordPiece", "vocab": map[string]int{"[UNK]": 5}}}},
	}
	for _, tc := range tests {
		if _, err := LoadJSON(writeJSON(t, tc.doc)); err == nil {
			t.Errorf("%s: LoadJSON succeeded, want error", tc.name)
		}
	}
}

func writeJSON(t *testing.T, v any) string {
	t.Helper()
	buf, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func BenchmarkEncodeBatchLongPassage(b *testing.B) {
	dir := testutil.SharedPath(b, "fixtures/tokenizer")
	tok, err := Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	buf, _ := os.ReadFile(filepath.Join(dir, "expected_encodings.json"))
	var doc struct {
		Cases []spCase `json:"cases"`
	}
	json.Unmarshal(buf, &doc)
	text := doc.Cases[len(doc.Cases)-1].Text
	for _, c := range doc.Cases {
		if c.Name == "long_passage_300_words" {
			text = c.Text
		}
	}
	opt := EncodeOptions{MaxLength: 128, Stride: 32, Truncation: true, ReturnOverflowing: true, Padding: PadLongest}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		EncodeBatch(tok, []string{text}, opt)
	}
}
