package sentencepiece

import (
	"slices"
	"testing"
)

// XLMRLayout puts <unk>, <s>, </s> first and keeps every other piece of the
// fixture in order; the re-laid model segments text into the same pieces.
func TestXLMRLayout(t *testing.T) {
	m, cases, _ := loadFixture(t)
	x, err := XLMRLayout(m)
	if err != nil {
		t.Fatal(err)
	}
	if x.IDToPiece(0) != "<unk>" || x.IDToPiece(1) != "<s>" || x.IDToPiece(2) != "</s>" || x.UnkID() != 0 || x.BOSID() != 1 || x.EOSID() != 2 {
		t.Fatalf("first pieces %q %q %q, unk/bos/eos %d/%d/%d", x.IDToPiece(0), x.IDToPiece(1), x.IDToPiece(2), x.UnkID(), x.BOSID(), x.EOSID())
	}
	var kept []string
	for _, p := range m.Pieces() {
		if p.Type != Control && p.Type != Unknown {
			kept = append(kept, p.Piece)
		}
	}
	var got []string
	for _, p := range x.Pieces()[3:] {
		got = append(got, p.Piece)
	}
	if !slices.Equal(got, kept) {
		t.Fatalf("%d pieces after the specials, want the fixture's %d non-special ones in order", len(got), len(kept))
	}
	for _, c := range cases {
		a, b := m.Encode(c.Text), x.Encode(c.Text)
		if len(a) != len(b) {
			t.Fatalf("%s: %d pieces, re-laid %d", c.Name, len(a), len(b))
		}
		for i := range a {
			if a[i].Piece != b[i].Piece {
				t.Errorf("%s: piece %d %q, re-laid %q", c.Name, i, a[i].Piece, b[i].Piece)
			}
		}
	}
}
