package sentencepiece

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// xlmrIDs maps the fixture's SentencePiece ids to XLMRobertaTokenizer's:
// <s> + (spm id + 1, the unknown piece → <unk> 3) + </s>.
func xlmrIDs(m *Model, spm []int) []int {
	out := []int{0}
	for _, id := range spm {
		if id == m.UnkID() {
			out = append(out, 3)
		} else {
			out = append(out, id+1)
		}
	}
	return append(out, 2)
}

// TestXLMRFixtureIDs runs the fairseq id mapping over the SentencePiece
// fixture (T5's spiece.model stands in for sentencepiece.bpe.model: no XLM-R
// model file is in the fixtures), then saves and reloads the tokenizer and
// checks the reloaded one encodes every case identically.
func TestXLMRFixtureIDs(t *testing.T) {
	m, cases, _ := loadFixture(t)
	tok := NewXLMR(m)
	if tok.Len() != m.Size()+2 || tok.PadID() != 1 || tok.EOSID() != 2 {
		t.Fatalf("Len %d pad %d eos %d, want %d 1 2", tok.Len(), tok.PadID(), tok.EOSID(), m.Size()+2)
	}
	dir := t.TempDir()
	if err := tok.Save(dir); err != nil {
		t.Fatal(err)
	}
	back, err := LoadXLMR(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cases {
		if strings.Contains(c.Text, "</s>") || strings.Contains(c.Text, "<extra_id_") || strings.Contains(c.Text, "<pad>") {
			continue // literal specials are XLM-R's own; see TestXLMRSpecials
		}
		want := xlmrIDs(m, c.IDs)
		got := tok.Encode(c.Text, true)
		if !slices.Equal(got, want) {
			t.Errorf("%s: Encode = %v, want %v", c.Name, got, want)
		}
		if again := back.Encode(c.Text, true); !slices.Equal(again, got) {
			t.Errorf("%s: reloaded tokenizer encodes %v, saved one %v", c.Name, again, got)
		}
		// <unk> is special in HF (skipped, or written "<unk>"), not SentencePiece's " ⁇ ".
		if d, w := tok.Decode(got, true), m.Decode(c.IDs); d != w && !slices.Contains(c.IDs, m.UnkID()) {
			t.Errorf("%s: Decode = %q, want %q", c.Name, d, w)
		}
		n++
	}
	if n < 5 {
		t.Fatalf("only %d fixture cases checked", n)
	}
}

func TestXLMRSpecials(t *testing.T) {
	m, _, _ := loadFixture(t)
	tok := NewXLMR(m)
	mask := m.Size() + 1
	for tokText, id := range map[string]int{"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": mask} {
		if got, ok := tok.TokenToID(tokText); !ok || got != id {
			t.Errorf("TokenToID(%q) = %d %v, want %d", tokText, got, ok, id)
		}
		if got := tok.IDToToken(id); got != tokText {
			t.Errorf("IDToToken(%d) = %q, want %q", id, got, tokText)
		}
	}
	a, b := tok.Encode("de", false), tok.Encode("a", false)
	ids, types := tok.EncodePair("de", "a")
	want := slices.Concat([]int{0}, a, []int{2, 2}, b, []int{2})
	if !slices.Equal(ids, want) || len(types) != len(ids) || slices.Max(types) != 0 {
		t.Fatalf("EncodePair = %v %v, want %v and zeros", ids, types, want)
	}
	if got := tok.Encode("de<mask>", false); got[len(got)-1] != mask {
		t.Fatalf("Encode(de<mask>) = %v, want <mask> %d split out", got, mask)
	}
	added := tok.AddTokens([]string{"[HELPFUL]"})
	if added[0] != mask+1 || tok.Len() != mask+2 {
		t.Fatalf("AddTokens: id %v Len %d, want %d %d", added, tok.Len(), mask+1, mask+2)
	}
	dir := t.TempDir()
	if err := tok.Save(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, XLMRFile)); err != nil {
		t.Fatal(err)
	}
	back, err := LoadXLMR(dir)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := back.TokenToID("[HELPFUL]"); !ok || id != mask+1 || back.Len() != tok.Len() {
		t.Fatalf("reloaded: [HELPFUL] %d %v, Len %d; want %d, %d", id, ok, back.Len(), mask+1, tok.Len())
	}
}
