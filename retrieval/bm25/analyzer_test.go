package bm25

import (
	"bufio"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/ragforge/ragforge/data"
)

var update = flag.Bool("update", false, "rewrite testdata/analyzer.golden")

const goldenPath = "testdata/analyzer.golden"

// analyzerCases are analyzed and compared with testdata/analyzer.golden, one
// line per case: "<name>\t<term> <term> ...". The golden terms were checked
// by hand against the tokenizer rules documented on biomedTokenizer and
// against bleve's stock analyzers.
var analyzerCases = []struct{ name, analyzer, text string }{
	{"biomed/receptors", "biomed", "Carcinoma HER2+ (score 3+), ER- e PR-; Ki-67 de 70%."},
	{"biomed/birads", "biomed", "Lesão BI-RADS 4: pH 7,4; volume 5mL; ≥10 campos; 5,5 cm."},
	{"biomed/units", "biomed", "Glicemia 110 mg/dL a 37°C, ±2, p<0,05, dor/ardor, pré- e pós-operatório."},
	{"biomed/fold", "biomed", "Coloração Hematoxilina-Eosina (H&E) ÁGUA d'água 10 µL fim.Início 1.000 10:30"},
	{"biomed/mixed", "biomed", "HER2+ BI-RADS 70% 5mL pH ≥10 5,5 Coloração"},
	{"pt/mixed", "pt", "HER2+ BI-RADS 70% 5mL pH ≥10 5,5 Coloração"},
	{"pt/protocol", "pt", "A coloração de hematoxilina-eosina é realizada nas lâminas após a desparafinação."},
	{"biomed/protocol", "biomed", "A coloração de hematoxilina-eosina é realizada nas lâminas após a desparafinação."},
	{"en/mixed", "en", "HER2+ BI-RADS 70% 5mL pH ≥10 5,5 Coloração"},
	{"standard/mixed", "standard", "HER2+ BI-RADS 70% 5mL pH ≥10 5,5 Coloração"},
	{"cjk/mixed", "cjk", "HER2+ 乳腺癌 Coloração"},
	{"biomed/empty", "biomed", " ( ) ; — + "},
	{"biomed-pt/protocol", "biomed-pt", "A coloração de hematoxilina-eosina é realizada nas lâminas após a desparafinação."},
	{"biomed-pt/mixed", "biomed-pt", "HER2+ BI-RADS 70% 5mL pH ≥10 5,5 Coloração"},
	{"biomed-pt/receptors", "biomed-pt", "Carcinoma HER2+ (score 3+), ER- e PR-; Ki-67 de 70%."},
	{"biomed-pt/plurals", "biomed-pt", "inflamação inflamações lesão lesões margens margem tumorais tumoral fixadas fixado nossos"},
}

func readGolden(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(goldenPath)
	if err != nil {
		t.Fatalf("open golden (run go test -run TestAnalyzerGolden -update): %v", err)
	}
	defer f.Close()
	g := map[string]string{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		name, terms, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			t.Fatalf("%s: line %d: no tab", goldenPath, line)
		}
		g[name] = terms
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestAnalyzerGolden(t *testing.T) {
	got := make([]string, 0, len(analyzerCases))
	for _, c := range analyzerCases {
		terms, err := Analyze(c.analyzer, c.text)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got = append(got, c.name+"\t"+strings.Join(terms, " "))
	}
	if *update {
		if err := os.WriteFile(goldenPath, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	golden := readGolden(t)
	if len(golden) != len(analyzerCases) {
		t.Errorf("%s has %d cases, the table %d", goldenPath, len(golden), len(analyzerCases))
	}
	for i, c := range analyzerCases {
		t.Run(c.name, func(t *testing.T) {
			want, ok := golden[c.name]
			if !ok {
				t.Fatalf("no golden line for %q", c.name)
			}
			if _, terms, _ := strings.Cut(got[i], "\t"); terms != want {
				t.Errorf("Analyze(%q, %q)\n got %q\nwant %q", c.analyzer, c.text, terms, want)
			}
		})
	}
}

// TestBiomedKeepsNotation checks the brief's examples one by one, by hand.
func TestBiomedKeepsNotation(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"HER2+", "her2+"},
		{"(HER2+)", "her2+"},
		{"BI-RADS", "bi-rads"},
		{"70%", "70%"},
		{"70%.", "70%"},
		{"5mL", "5ml"},
		{"pH", "ph"},
		{"≥10", "≥10"},
		{"5,5", "5,5"},
		{"Coloração", "coloracao"},
		{"coloracao", "coloracao"},
		{"ER-", "er-"},
		{"mg/dL", "mg/dl"},
		{"p<0,05", "p 0,05"},
		{"dor/ardor", "dor ardor"},
		{"pré-", "pre"},
		{"x, y", "x y"},
		// Portuguese and English stop words go; notation stays.
		{"de a em", ""},
		{"HER2+ e BI-RADS no pH of the", "her2+ bi-rads ph"},
		{"É à Às", ""}, // folded like the terms: "é" → "e", "às" → "as"
		{"µL", "μl"},
	} {
		terms, err := Analyze(BiomedAnalyzer, c.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(terms, " "); got != c.want {
			t.Errorf("biomed(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestBiomedPTStems checks by hand that biomed-pt conflates the inflections
// the light stemmer is for, stems before it folds accents (so "-ões" and
// "-ão" meet), keeps notation, and drops stop words in any case or accent.
func TestBiomedPTStems(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{"inflamação", "inflamações"},
		{"lesão", "lesões"},
		{"margem", "margens"},
		{"tumoral", "tumorais"},
		{"fixado", "fixadas"},
		{"Coloração", "colorações"},
		{"HER2+", "her2+"},
		{"BI-RADS", "bi-rads"},
	} {
		ta, err := Analyze(BiomedPTAnalyzer, c.a)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := Analyze(BiomedPTAnalyzer, c.b)
		if err != nil {
			t.Fatal(err)
		}
		if len(ta) != 1 || !slices.Equal(ta, tb) {
			t.Errorf("biomed-pt(%q) = %q, biomed-pt(%q) = %q: want one equal term", c.a, ta, c.b, tb)
		}
	}
	for _, in := range []string{"de a em", "É à Às", "NOSSOS Nossas", "the of"} {
		if terms, err := Analyze(BiomedPTAnalyzer, in); err != nil || len(terms) != 0 {
			t.Errorf("biomed-pt(%q) = %q, %v: want no terms (stop words)", in, terms, err)
		}
	}
}

func TestBiomedOffsets(t *testing.T) {
	in := "Lesão (BI-RADS 4), HER2+."
	a := newMapping(BiomedAnalyzer).AnalyzerNamed(BiomedAnalyzer)
	if a == nil {
		t.Fatal("biomed analyzer not registered")
	}
	ts := a.Analyze([]byte(in))
	want := []struct {
		start, end, pos int
	}{{0, 6, 1}, {8, 15, 2}, {16, 17, 3}, {20, 25, 4}} // "Lesão" is 6 bytes: ã is 2
	if len(ts) != len(want) {
		t.Fatalf("got %d tokens, want %d", len(ts), len(want))
	}
	for i, w := range want {
		if ts[i].Start != w.start || ts[i].End != w.end || ts[i].Position != w.pos {
			t.Errorf("token %d %q: [%d,%d) pos %d, want [%d,%d) pos %d",
				i, ts[i].Term, ts[i].Start, ts[i].End, ts[i].Position, w.start, w.end, w.pos)
		}
	}
}

func TestAnalyzeUnknown(t *testing.T) {
	if _, err := Analyze("klingon", "x"); err == nil {
		t.Error("Analyze with an unknown analyzer: no error")
	}
	if got := Analyzers(); !slices.Equal(got, []string{"biomed", "biomed-pt", "cjk", "en", "pt", "standard"}) {
		t.Errorf("Analyzers() = %v", got)
	}
}

// TestNFCEveryAnalyzer: a composed (NFC) and a decomposed (NFD) spelling
// analyze to the same terms with every analyzer, and a chunk indexed in one
// form is found by a query in the other.
func TestNFCEveryAnalyzer(t *testing.T) {
	nfc, nfd := "fixação", "fixac\u0327a\u0303o"
	if nfc == nfd || norm.NFC.String(nfd) != nfc {
		t.Fatalf("test strings: %q and %q are not the NFC and NFD forms of one word", nfc, nfd)
	}
	for _, name := range Analyzers() {
		t.Run(name, func(t *testing.T) {
			a, err := Analyze(name, "Solução de "+nfc)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Analyze(name, "Solução de "+nfd)
			if err != nil {
				t.Fatal(err)
			}
			if len(a) == 0 || !slices.Equal(a, b) {
				t.Fatalf("NFC terms %q, NFD terms %q", a, b)
			}
			for _, c := range []struct{ indexed, query string }{{nfc, nfd}, {nfd, nfc}} {
				ix, err := NewMemory([]data.Chunk{
					{ID: "d#0", DocID: "d", Text: "Tempo de " + c.indexed + " do tecido"},
					{ID: "e#0", DocID: "e", Text: "Lâmina corada"},
				}, Config{K1: 1.2, B: 0.75, Analyzer: name})
				if err != nil {
					t.Fatal(err)
				}
				hits, err := ix.Search(c.query, 5)
				ix.Close()
				if err != nil {
					t.Fatal(err)
				}
				if len(hits) != 1 || hits[0].ID != "d#0" {
					t.Errorf("indexed %q, query %q: hits %v, want [d#0]", c.indexed, c.query, hits)
				}
			}
		})
	}
}

// TestStopWordQuery: a query made only of Portuguese function words finds
// nothing with the default analyzer.
func TestStopWordQuery(t *testing.T) {
	ix, err := NewMemory([]data.Chunk{
		{ID: "d#0", DocID: "d", Text: "A fixação em formol de 10% é feita em 24 horas."},
		{ID: "e#0", DocID: "e", Text: "Carcinoma HER2+ de mama, BI-RADS 4, pH 7,4."},
	}, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"de a em", nil},
		{"the of and", nil},
		{"HER2+ de", []string{"e#0"}},
		{"pH", []string{"e#0"}},
		{"formol em", []string{"d#0"}},
	} {
		hits, err := ix.Search(c.q, 5)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range hits {
			got = append(got, h.ID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Search(%q) = %v, want %v", c.q, got, c.want)
		}
	}
}
