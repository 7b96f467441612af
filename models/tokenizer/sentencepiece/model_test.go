package sentencepiece

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/ragforge/ragforge/internal/testutil"
)

type spCase struct {
	Name       string   `json:"name"`
	Text       string   `json:"text"`
	IDs        []int    `json:"ids"`
	IDsWithEOS []int    `json:"ids_with_eos"`
	Pieces     []string `json:"pieces"`
	IDPieces   []string `json:"id_pieces"`
	Surfaces   []string `json:"surfaces"`
	CharSpans  [][2]int `json:"surface_char_spans"`
	ByteSpans  [][2]int `json:"surface_byte_spans"`
	Decoded    string   `json:"decoded"`
}

func loadFixture(t testing.TB) (*Model, []spCase, string) {
	t.Helper()
	dir := testutil.SharedPath(t, "fixtures/tokenizer")
	m, err := Load(filepath.Join(dir, "spiece.model"))
	if err != nil {
		t.Fatal(err)
	}
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
	if len(doc.Cases) != 32 {
		t.Fatalf("fixture has %d cases, want 32", len(doc.Cases))
	}
	return m, doc.Cases, dir
}

func TestParseModel(t *testing.T) {
	m, _, _ := loadFixture(t)
	if m.Size() != 2000 {
		t.Errorf("Size = %d, want 2000", m.Size())
	}
	want := []string{"<pad>", "</s>", "<unk>", ".", "s", "▁de", "▁", "▁a", "r", ",", "▁e", ":"}
	for i, w := range want {
		if got := m.IDToPiece(i); got != w {
			t.Errorf("piece %d = %q, want %q", i, got, w)
		}
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"pad", m.PadID(), 0},
		{"eos", m.EOSID(), 1},
		{"unk", m.UnkID(), 2},
		{"bos", m.BOSID(), -1},
		{"type pad", m.pieces[0].Type, Control},
		{"type unk", m.pieces[2].Type, Unknown},
		{"type '.'", m.pieces[3].Type, Normal},
		{"score '.'", m.pieces[3].Score, float32(-3.26451)},
		{"normalizer", m.Normalizer().Name, "nmt_nfkc"},
		{"dummy prefix", m.Normalizer().AddDummyPrefix, true},
		{"extra ws", m.Normalizer().RemoveExtraWhitespaces, true},
	}
	for _, tc := range tests {
		if tc.name == "score '.'" {
			if d := tc.got.(float32) - tc.want.(float32); d > 1e-5 || d < -1e-5 {
				t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
			}
			continue
		}
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	m, _, _ := loadFixture(t)
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"   ", ""},
		{"a", "▁a"},
		{"  a  b\t\nc  ", "▁a▁b▁c"},
		{"½", "▁1⁄2"},           // NFKC
		{"ﬁ", "▁fi"},            // ligature
		{"ＡＢＣ", "▁ABC"},         // full width
		{"µ", "▁μ"},             // micro sign → Greek mu
		{"º", "▁o"},             // ordinal indicator
		{"…", "▁..."},           // ellipsis
		{"a\xffb", "▁a\uFFFDb"}, // invalid byte
	}
	for _, tc := range tests {
		got, n2o := m.Normalize(tc.in)
		if got != tc.want {
			t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if len(n2o) != len(got)+1 {
			t.Errorf("Normalize(%q): len(normToOrig) = %d, want %d", tc.in, len(n2o), len(got)+1)
		}
	}
}

func TestEncodeFixtures(t *testing.T) {
	m, cases, _ := loadFixture(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			toks := m.Encode(c.Text)
			ids := make([]int, len(toks))
			pieces := make([]string, len(toks))
			idPieces := make([]string, len(toks))
			bspans := make([][2]int, len(toks))
			cspans := make([][2]int, len(toks))
			surf := make([]string, len(toks))
			for i, tk := range toks {
				ids[i] = tk.ID
				pieces[i] = tk.Piece
				idPieces[i] = m.IDToPiece(tk.ID)
				bspans[i] = [2]int{tk.Begin, tk.End}
				cspans[i] = [2]int{utf8.RuneCountInString(c.Text[:tk.Begin]), utf8.RuneCountInString(c.Text[:tk.End])}
				surf[i] = c.Text[tk.Begin:tk.End]
			}
			if !slices.Equal(ids, c.IDs) {
				t.Fatalf("ids\n got %v\nwant %v\npieces %q", ids, c.IDs, pieces)
			}
			if c.IDs == nil && len(ids) != 0 {
				t.Fatalf("ids = %v, want empty", ids)
			}
			check := func(what string, got, want any) {
				t.Helper()
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				if string(g) != string(w) {
					t.Errorf("%s\n got %s\nwant %s", what, g, w)
				}
			}
			check("pieces", pieces, c.Pieces)
			check("id_pieces", idPieces, c.IDPieces)
			check("surface_byte_spans", bspans, c.ByteSpans)
			check("surface_char_spans", cspans, c.CharSpans)
			check("surfaces", surf, c.Surfaces)
			if got := m.Decode(c.IDs); got != c.Decoded {
				t.Errorf("Decode = %q, want %q", got, c.Decoded)
			}
		})
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	m, cases, _ := loadFixture(t)
	m2, err := Parse(marshalModelProto(m.pieces, m.trainer, m.normalizer))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if got := m2.EncodeIDs(c.Text); !slices.Equal(got, c.IDs) {
			t.Errorf("%s: re-marshalled model ids %v, want %v", c.Name, got, c.IDs)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		buf  []byte
	}{
		{"truncated tag", []byte{0x0a}},
		{"truncated piece", []byte{0x0a, 0x05, 0x0a}},
		{"no unk piece", marshalModelProto([]Piece{{Piece: "a", Score: -1, Type: Normal}}, DefaultTrainerSpec(), DefaultNormalizerSpec())},
		{"bad charsmap", marshalModelProto([]Piece{{Piece: "<unk>", Type: Unknown}}, DefaultTrainerSpec(), NormalizerSpec{PrecompiledCharsmap: []byte{9, 0, 0, 0, 1}})},
	}
	for _, tc := range tests {
		if _, err := Parse(tc.buf); err == nil {
			t.Errorf("%s: Parse succeeded, want error", tc.name)
		}
	}
}

func BenchmarkEncodeLongPassage(b *testing.B) {
	m, cases, _ := loadFixture(b)
	var text string
	for _, c := range cases {
		if c.Name == "long_passage_300_words" {
			text = c.Text
		}
	}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		m.Encode(text)
	}
}
