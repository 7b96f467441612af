package chunk

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func readPieces(t *testing.T, name string) []Piece {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var want []Piece
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return want
}

// The golden boundaries were decided by hand: abbreviations (p. ex., Fig.,
// Tab., cf., Dr., et al., e.g.), decimals (5,5 / 3.5), a quoted sentence, a
// single newline inside a sentence, a blank line after "min." (an
// abbreviation, so only the blank line ends it) and a list marker "1.".
func TestSplitSentencesGolden(t *testing.T) {
	text := "Adicionar 5,5 mL de formol a 10%, p. ex. no frasco azul. Ver Fig. 2 e Tab. 3 (cf. Dr. Souza et al. 2020). A temperatura é 3.5 °C! Está pronto? \"Sim.\" Lavar em água\ncorrente 2 min. \n\nSecar\n\n1. Corar com H&E. Isto continua, e.g. na lâmina."
	want := readPieces(t, "sentences_pt.golden")
	got := SplitSentences(text)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %d sentences:\n%+v\nwant %d:\n%+v", len(got), got, len(want), want)
	}
	for _, p := range got {
		if text[p.Start:p.End] != p.Text {
			t.Errorf("piece %q: span [%d,%d) is %q", p.Text, p.Start, p.End, text[p.Start:p.End])
		}
	}
}

func TestSplitSentencesCases(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string
	}{
		{"empty", "", nil},
		{"blank", " \n\n\t ", nil},
		{"no terminal", "sem ponto final", []string{"sem ponto final"}},
		{"lowercase continues", "Usar 2 mL. depois lavar.", []string{"Usar 2 mL. depois lavar."}},
		{"unit then capital", "Usar 2 mL. Depois lavar.", []string{"Usar 2 mL.", "Depois lavar."}},
		{"ellipsis and question", "Espere… Pronto?! Sim.", []string{"Espere…", "Pronto?!", "Sim."}},
		{"initials", "Segundo J. R. Silva. Fim.", []string{"Segundo J. R. Silva.", "Fim."}},
		{"number ends sentence", "O valor foi 10. Depois 20.", []string{"O valor foi 10.", "Depois 20."}},
		{"decimal with period", "pH 7.4 no tampão. Ok.", []string{"pH 7.4 no tampão.", "Ok."}},
		{"closing paren", "(Ver anexo.) Próximo passo.", []string{"(Ver anexo.)", "Próximo passo."}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range SplitSentences(tc.text) {
				got = append(got, p.Text)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
