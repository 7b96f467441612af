package sentencepiece

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
)

func loadT5(t *testing.T) (*T5, []spCase) {
	t.Helper()
	m, cases, _ := loadFixture(t)
	return NewT5(m, DefaultExtraIDs), cases
}

func TestT5FixtureIDsWithEOS(t *testing.T) {
	tok, cases := loadT5(t)
	for _, c := range cases {
		if strings.Contains(c.Text, "</s>") || strings.Contains(c.Text, "<extra_id_") {
			continue // literal special tokens: HF splits them, see TestT5SpecialSplit
		}
		if got := tok.Encode(c.Text, true); !slices.Equal(got, c.IDsWithEOS) {
			t.Errorf("%s: Encode(addSpecial) = %v, want %v", c.Name, got, c.IDsWithEOS)
		}
		if got := tok.Encode(c.Text, false); !slices.Equal(got, c.IDs) && len(got)+len(c.IDs) > 0 {
			t.Errorf("%s: Encode = %v, want %v", c.Name, got, c.IDs)
		}
	}
}

func TestT5Sentinels(t *testing.T) {
	tok, _ := loadT5(t)
	tests := []struct {
		tok string
		id  int
	}{
		{"<extra_id_0>", 2099},
		{"<extra_id_1>", 2098},
		{"<extra_id_99>", 2000},
		{"</s>", 1},
		{"<pad>", 0},
		{"<unk>", 2},
		{"▁de", 5},
	}
	for _, tc := range tests {
		if id, ok := tok.TokenToID(tc.tok); !ok || id != tc.id {
			t.Errorf("TokenToID(%q) = %d, %v; want %d", tc.tok, id, ok, tc.id)
		}
		if got := tok.IDToToken(tc.id); got != tc.tok {
			t.Errorf("IDToToken(%d) = %q, want %q", tc.id, got, tc.tok)
		}
	}
	for _, bad := range []string{"<extra_id_100>", "<extra_id_01>", "<extra_id_-1>"} {
		if id, ok := tok.TokenToID(bad); ok {
			t.Errorf("TokenToID(%q) = %d, want not found", bad, id)
		}
	}
	if tok.Len() != 2100 || tok.PadID() != 0 || tok.EOSID() != 1 {
		t.Errorf("Len, PadID, EOSID = %d, %d, %d; want 2100, 0, 1", tok.Len(), tok.PadID(), tok.EOSID())
	}
	if got := tok.IDToToken(2100); got != "" {
		t.Errorf("IDToToken(2100) = %q, want \"\"", got)
	}
}

// Expected ids are assembled from fixture pieces: "▁Co r ar ▁com" =
// [499 8 41 13] and "▁d urante" = [109 661] (sentinel_literal case), "▁ texto"
// = [6 495] (eos_literal case).
func TestT5SpecialSplit(t *testing.T) {
	tok, _ := loadT5(t)
	tests := []struct {
		text string
		want []int
	}{
		{"Corar com <extra_id_0> durante <extra_id_1>", []int{499, 8, 41, 13, 2099, 109, 661, 2098, 1}},
		{"texto </s> com", []int{6, 495, 1, 13, 1}},
		{"<pad><unk></s>", []int{0, 2, 1, 1}},
		{"<extra_id_0><extra_id_99>", []int{2099, 2000, 1}},
	}
	for _, tc := range tests {
		if got := tok.Encode(tc.text, true); !slices.Equal(got, tc.want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}

func TestT5AddTokens(t *testing.T) {
	tok, _ := loadT5(t)
	if got := tok.AddTokens([]string{"[HELPFUL]", "[NOT_HELPFUL]", "[HELPFUL]", "</s>"}); !slices.Equal(got, []int{2100, 2101, 2100, 1}) {
		t.Fatalf("AddTokens = %v, want [2100 2101 2100 1]", got)
	}
	if tok.Len() != 2102 {
		t.Errorf("Len = %d, want 2102", tok.Len())
	}
	if got := tok.Encode("[HELPFUL]", false); !slices.Equal(got, []int{2100}) {
		t.Errorf("Encode([HELPFUL]) = %v, want [2100]", got)
	}
	// tags_in_text: " O tempo é 24 horas." is ids[9:16] of the raw encoding.
	text := "[HELPFUL] O tempo é 24 horas. [NOT_HELPFUL]"
	want := []int{2100, 56, 476, 100, 6, 566, 724, 3, 2101, 1}
	got := tok.Encode(text, true)
	if !slices.Equal(got, want) {
		t.Fatalf("Encode(%q) = %v, want %v", text, got, want)
	}
	if d := tok.Decode(got, true); d != text {
		t.Errorf("Decode(skipSpecial) = %q, want %q", d, text)
	}
	if d := tok.Decode([]int{2099, 109, 661, 2, 1, 0}, false); d != "<extra_id_0> durante ⁇  </s> <pad>" {
		t.Errorf("Decode(keep special) = %q", d)
	}
	if d := tok.Decode([]int{2099, 109, 661, 2, 1, 0}, true); d != "durante" {
		t.Errorf("Decode(skip special) = %q, want %q", d, "durante")
	}
}

func TestT5SaveLoad(t *testing.T) {
	tok, cases := loadT5(t)
	tok.AddTokens([]string{"[HELPFUL]", "[NOT_HELPFUL]"})
	tok.AddSpecialTokens([]string{"<sep>"})
	dir := t.TempDir()
	if err := tok.Save(dir); err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(filepath.Join(testutil.SharedPath(t, "fixtures/tokenizer"), "spiece.model"))
	saved, _ := os.ReadFile(filepath.Join(dir, "spiece.model"))
	if !slices.Equal(orig, saved) {
		t.Errorf("saved spiece.model differs from the original")
	}
	var added map[string]int
	buf, err := os.ReadFile(filepath.Join(dir, "added_tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(buf, &added); err != nil {
		t.Fatal(err)
	}
	if added["[HELPFUL]"] != 2100 || added["[NOT_HELPFUL]"] != 2101 || added["<sep>"] != 2102 || added["<extra_id_0>"] != 2099 || len(added) != 103 {
		t.Errorf("added_tokens.json = %d entries, [HELPFUL]=%d [NOT_HELPFUL]=%d <sep>=%d <extra_id_0>=%d",
			len(added), added["[HELPFUL]"], added["[NOT_HELPFUL]"], added["<sep>"], added["<extra_id_0>"])
	}
	back, err := LoadT5(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Len() != 2103 || !slices.Equal(back.Added(), tok.Added()) {
		t.Fatalf("reloaded Len %d added %v; want 2103 %v", back.Len(), back.Added(), tok.Added())
	}
	for _, c := range cases {
		if a, b := tok.Encode(c.Text, true), back.Encode(c.Text, true); !slices.Equal(a, b) {
			t.Errorf("%s: reloaded Encode %v, want %v", c.Name, b, a)
		}
	}
	// Without tokenizer_config.json the added tokens come from added_tokens.json.
	if err := os.Remove(filepath.Join(dir, "tokenizer_config.json")); err != nil {
		t.Fatal(err)
	}
	back, err = LoadT5(dir)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := back.TokenToID("[NOT_HELPFUL]"); !ok || id != 2101 || back.Len() != 2103 {
		t.Errorf("from added_tokens.json: [NOT_HELPFUL] = %d, %v, Len %d", id, ok, back.Len())
	}
}

func TestLoadT5Errors(t *testing.T) {
	src := testutil.SharedPath(t, "fixtures/tokenizer")
	model, err := os.ReadFile(filepath.Join(src, "spiece.model"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, config string
	}{
		{"gap in added ids", `{"added_tokens_decoder": {"2101": {"content": "[X]"}}}`},
		{"bad key", `{"added_tokens_decoder": {"x": {"content": "[X]"}}}`},
		{"bad json", `{`},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "spiece.model"), model, 0o644)
		os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(tc.config), 0o644)
		if _, err := LoadT5(dir); err == nil {
			t.Errorf("%s: LoadT5 succeeded, want error", tc.name)
		}
	}
	if _, err := LoadT5(t.TempDir()); err == nil {
		t.Errorf("LoadT5(empty dir) succeeded, want error")
	}
}
