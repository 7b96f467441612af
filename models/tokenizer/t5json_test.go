package tokenizer

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
)

// A T5 tokenizer saved by ragforge carries the tokenizer.json that
// transformers' T5Converter writes: every node is checked field by field
// against that layout, and the file, read back through ragforge's own
// Unigram (LoadJSON), gives the fixture ids and the native tokenizer's ids.
func TestT5SaveWritesTokenizerJSON(t *testing.T) {
	src := testutil.SharedPath(t, "fixtures/tokenizer")
	native, err := sentencepiece.LoadT5(src)
	if err != nil {
		t.Fatal(err)
	}
	native.AddTokens([]string{"[HELPFUL]", "[NOT_HELPFUL]"}) // as train/filtertrain does
	dir := t.TempDir()
	if err := native.Save(dir); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	sp := native.SentencePiece()
	charsmap := base64.StdEncoding.EncodeToString(sp.Normalizer().PrecompiledCharsmap)
	if charsmap == "" {
		t.Fatal("fixture spiece.model has no precompiled charsmap")
	}
	metaspace := map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}
	want := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Precompiled", "precompiled_charsmap": charsmap},
			map[string]any{"type": "Strip", "strip_left": false, "strip_right": true},
			map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": " {2,}"}, "content": "▁"},
		}},
		"pre_tokenizer": metaspace,
		"decoder":       metaspace,
		"post_processor": map[string]any{
			"type": "TemplateProcessing",
			"single": []any{
				map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0.0}},
				map[string]any{"SpecialToken": map[string]any{"id": "</s>", "type_id": 0.0}},
			},
			"pair": []any{
				map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0.0}},
				map[string]any{"SpecialToken": map[string]any{"id": "</s>", "type_id": 0.0}},
				map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 0.0}},
				map[string]any{"SpecialToken": map[string]any{"id": "</s>", "type_id": 0.0}},
			},
			"special_tokens": map[string]any{"</s>": map[string]any{"id": "</s>", "ids": []any{1.0}, "tokens": []any{"</s>"}}},
		},
	}
	for k, w := range want {
		if !reflect.DeepEqual(doc[k], w) {
			t.Errorf("field %q = %v\nwant %v", k, doc[k], w)
		}
	}
	model := doc["model"].(map[string]any)
	if model["type"] != "Unigram" || model["unk_id"] != 2.0 || model["byte_fallback"] != false {
		t.Errorf("model = type %v unk_id %v byte_fallback %v, want Unigram 2 false", model["type"], model["unk_id"], model["byte_fallback"])
	}
	vocab := model["vocab"].([]any)
	if len(vocab) != 2100 {
		t.Fatalf("model.vocab has %d entries, want 2000 pieces + 100 sentinels", len(vocab))
	}
	for id, p := range sp.Pieces() {
		if e := vocab[id].([]any); e[0] != p.Piece || e[1] != float64(p.Score) {
			t.Fatalf("vocab[%d] = %v, want [%q %v]", id, e, p.Piece, p.Score)
		}
	}
	for id, w := range map[int]string{2000: "<extra_id_99>", 2099: "<extra_id_0>"} {
		if e := vocab[id].([]any); e[0] != w || e[1] != 0.0 {
			t.Errorf("vocab[%d] = %v, want [%s 0]", id, e, w)
		}
	}
	type added struct {
		ID                                      int
		Content                                 string
		LStrip, RStrip, Normalized, Single, Spe bool
	}
	var got []added
	for _, a := range doc["added_tokens"].([]any) {
		m := a.(map[string]any)
		got = append(got, added{int(m["id"].(float64)), m["content"].(string), m["lstrip"].(bool), m["rstrip"].(bool),
			m["normalized"].(bool), m["single_word"].(bool), m["special"].(bool)})
	}
	if len(got) != 3+100+2 {
		t.Fatalf("%d added tokens, want <pad> </s> <unk>, 100 sentinels, 2 labels", len(got))
	}
	for _, w := range []added{
		{0, "<pad>", false, false, false, false, true}, {1, "</s>", false, false, false, false, true}, {2, "<unk>", false, false, false, false, true},
		{2000, "<extra_id_99>", true, true, false, false, true}, {2099, "<extra_id_0>", true, true, false, false, true},
		{2100, "[HELPFUL]", false, false, true, false, false}, {2101, "[NOT_HELPFUL]", false, false, true, false, false},
	} {
		i := slices.IndexFunc(got, func(a added) bool { return a.ID == w.ID })
		if i < 0 || got[i] != w {
			t.Errorf("added token %d = %+v, want %+v", w.ID, got[max(i, 0)], w)
		}
	}

	// ids: the exported Unigram through ragforge's Unigram code.
	fromJSON, err := LoadJSON(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if fromJSON.Len() != native.Len() {
		t.Fatalf("Len %d, want %d", fromJSON.Len(), native.Len())
	}
	cases := spCases(t, src)
	checked := 0
	for _, c := range cases {
		got := fromJSON.Encode(c.Text, true)
		if w := native.Encode(c.Text, true); !slices.Equal(got, w) {
			t.Errorf("%s: tokenizer.json ids %v, native %v", c.Name, got, w)
		}
		if strings.Contains(c.Text, "</s>") || strings.Contains(c.Text, "<extra_id_") || strings.Contains(c.Text, "HELPFUL]") || strings.Contains(c.Text, "<pad>") {
			continue // the fixture's raw SentencePiece ids do not split special tokens out
		}
		checked++
		if !slices.Equal(got, c.IDsWithEOS) {
			t.Errorf("%s: tokenizer.json ids %v, fixture %v", c.Name, got, c.IDsWithEOS)
		}
	}
	if checked < 20 {
		t.Errorf("only %d fixture cases compared", checked)
	}
	if got := fromJSON.Encode("[HELPFUL] [NOT_HELPFUL] <extra_id_0>", true); !slices.Equal(got, []int{2100, 2101, 2099, 1}) {
		t.Errorf("labels and sentinel: %v, want [2100 2101 2099 1]", got)
	}
}
