package bm25

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval"
)

// toyChunks is the hand-scored corpus. After the biomed analyzer:
//
//	c1: her2+ carcinoma ductal                                         dl = 3
//	c2: carcinoma lobular carcinoma invasivo                           dl = 4
//	c3: bi-rads 4 lesao suspeita                                       dl = 4
//	c4: coloracao her2+ positiva tumor carcinoma difuso her2+ amplificado    dl = 8
//
// N = 4, Σdl = 19, avgdl = 4.75, vocabulary = 14 terms.
// Document frequencies: her2+ 2 (c1, c4), carcinoma 3 (c1, c2, c4), coloracao 1 (c4).
func toyChunks() []data.Chunk {
	texts := []string{
		"HER2+ carcinoma ductal",
		"Carcinoma lobular, carcinoma invasivo.",
		"BI-RADS 4: lesão suspeita",
		// No stop words ("em", "com" would be dropped by the biomed analyzer).
		"Coloração HER2+ positiva tumor carcinoma difuso HER2+ amplificado",
	}
	cs := make([]data.Chunk, len(texts))
	for i, t := range texts {
		id := string(rune('1' + i))
		cs[i] = data.Chunk{ID: "c" + id, DocID: "d" + id, Index: 0, Text: t, Start: 0, End: len(t),
			Meta: map[string]any{"category": "Coloracoes", "page_number": float64(i + 1)}}
	}
	return cs
}

func hitsClose(t *testing.T, label string, got, want []retrieval.Hit, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d hits %v, want %d %v", label, len(got), got, len(want), want)
	}
	for i := range want {
		if got[i].ID != want[i].ID || math.Abs(got[i].Score-want[i].Score) > tol {
			t.Errorf("%s: hit %d = %s %.9f, want %s %.9f", label, i, got[i].ID, got[i].Score, want[i].ID, want[i].Score)
		}
	}
}

// TestSearchHandComputed checks Search against BM25 scores worked out by hand
// (calculator) from
//
//	idf  = ln(1 + (N − n + 0.5)/(n + 0.5))
//	part = tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl))
//
// idf(her2+) = ln 2 = 0.693147181, idf(carcinoma) = ln(10/7) = 0.356674944,
// idf(coloracao) = ln(10/3) = 1.203972804. E.g. k1 = 1.2, b = 0.75, query
// "HER2+ carcinoma", c1: part = 2.2/(1 + 1.2·(0.25 + 0.75·3/4.75)) =
// 1.177464789, score = (0.693147181 + 0.356674944)·1.177464789 = 1.236128586.
// Search uses exact document lengths, so the tolerance is float rounding.
func TestSearchHandComputed(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		query string
		want  []retrieval.Hit
	}{
		{"default/two terms", DefaultConfig(), "HER2+ carcinoma",
			[]retrieval.Hit{{ID: "c1", Score: 1.236128586}, {ID: "c4", Score: 1.077943538}, {ID: "c2", Score: 0.513219024}}},
		{"default/folded accents", DefaultConfig(), "coloracao",
			[]retrieval.Hit{{ID: "c4", Score: 0.940674079}}},
		{"default/repeated term counts twice", DefaultConfig(), "carcinoma carcinoma",
			[]retrieval.Hit{{ID: "c2", Score: 1.026438049}, {ID: "c1", Score: 0.839944375}, {ID: "c4", Score: 0.557346268}}},
		{"rank_bm25/two terms", RankBM25Config(), "HER2+ carcinoma",
			[]retrieval.Hit{{ID: "c1", Score: 1.258461853}, {ID: "c4", Score: 1.084406990}, {ID: "c2", Score: 0.536778133}}},
		{"rank_bm25/folded accents", RankBM25Config(), "Coloração",
			[]retrieval.Hit{{ID: "c4", Score: 0.920542587}}},
		{"b=0/long doc wins", Config{K1: 1.2, B: 0}, "HER2+ carcinoma",
			[]retrieval.Hit{{ID: "c4", Score: 1.309752317}, {ID: "c1", Score: 1.049822124}, {ID: "c2", Score: 0.490428048}}},
		{"b=0/tie broken by id", Config{K1: 1.2, B: 0}, "carcinoma carcinoma",
			[]retrieval.Hit{{ID: "c2", Score: 0.980856096}, {ID: "c1", Score: 0.713349888}, {ID: "c4", Score: 0.713349888}}},
		{"no match", DefaultConfig(), "hematoxilina", []retrieval.Hit{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ix, err := NewMemory(toyChunks(), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			if got := ix.AvgDocLen(); got != 4.75 {
				t.Fatalf("AvgDocLen = %v, want 4.75", got)
			}
			got, err := ix.Search(tc.query, 10)
			if err != nil {
				t.Fatal(err)
			}
			hitsClose(t, tc.query, got, tc.want, 1e-8)
		})
	}
}

// TestSearchBleveNative pins what bleve v2.6.3's own "bm25" model computes, as
// documented in the package comment: per term
// idf·√f·k1/(√f + k1·(1 − b + b·dl/A)) with k1 = 1.2, b = 0.75 and
// A = ceil(vocabulary/N) = ceil(14/4) = 4, times idf·queryNorm
// (queryNorm = 1/√(idf(her2+)² + idf(carcinoma)²) = 1.293993) when the query
// has several terms, the sum times coord = matched/2. By hand:
//
//	c1: (0.693147²·1.2/(1 + 1.2·0.8125) + 0.356675²·1.2/(1 + 1.2·0.8125))·1.293993 = 0.473639654
//	c4: (0.693147²·√2·1.2/(√2 + 1.2·1.75) + 0.356675²·1.2/(1 + 1.2·1.75))·1.293993 = 0.360808663
//	c2: 0.356675²·√2·1.2/(√2 + 1.2)·1.293993·(1/2)                                    = 0.052970794
//
// dl comes back from a float32 norm, hence the 1e-6 tolerance. Its ranking
// agrees with Search here; its scores do not, and the Config is ignored.
func TestSearchBleveNative(t *testing.T) {
	ix, err := NewMemory(toyChunks(), RankBM25Config()) // k1 = 1.5 is ignored by bleve
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for _, tc := range []struct {
		query string
		want  []retrieval.Hit
	}{
		{"HER2+ carcinoma", []retrieval.Hit{{ID: "c1", Score: 0.473639654}, {ID: "c4", Score: 0.360808663}, {ID: "c2", Score: 0.052970794}}},
		{"coloracao", []retrieval.Hit{{ID: "c4", Score: 0.466053989}}}, // 1.203973·1.2/(1 + 1.2·1.75)
	} {
		got, err := ix.SearchBleve(tc.query, 10)
		if err != nil {
			t.Fatal(err)
		}
		hitsClose(t, "bleve "+tc.query, got, tc.want, 1e-6)
	}
	if got, err := ix.SearchBleve("HER2+ carcinoma", 2); err != nil || len(got) != 2 {
		t.Errorf("SearchBleve k=2: %v, %v", got, err)
	}
	if _, err := ix.SearchBleve("x", 0); !errors.Is(err, ErrBadK) {
		t.Errorf("SearchBleve k=0: err %v, want ErrBadK", err)
	}
}

func TestSearchK(t *testing.T) {
	ix, err := NewMemory(toyChunks(), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	const all = "HER2+ carcinoma BI-RADS" // every chunk matches a term
	for _, tc := range []struct{ k, want int }{{1, 1}, {2, 2}, {4, 4}, {5, 4}, {1000, 4}} {
		got, err := ix.Search(all, tc.k)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.want {
			t.Errorf("k=%d: %d hits, want %d", tc.k, len(got), tc.want)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Score > got[i-1].Score {
				t.Errorf("k=%d: hits not sorted: %v", tc.k, got)
			}
		}
	}
	// Ties at the cut: with b = 0 c1 and c4 tie for second; k = 2 keeps c1 (smaller id).
	ix0, err := NewMemory(toyChunks(), Config{K1: 1.2, B: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer ix0.Close()
	got, err := ix0.Search("carcinoma", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "c2" || got[1].ID != "c1" {
		t.Errorf("tie at the cut: %v, want c2, c1", got)
	}
	for _, k := range []int{0, -1} {
		if _, err := ix.Search("carcinoma", k); !errors.Is(err, ErrBadK) {
			t.Errorf("k=%d: err %v, want ErrBadK", k, err)
		}
	}
}

// TestSearchEmptyQuery: a query without terms is not an error; it returns an
// empty, non-nil slice.
func TestSearchEmptyQuery(t *testing.T) {
	ix, err := NewMemory(toyChunks(), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for _, q := range []string{"", "   \n", "( ; ) —"} {
		for name, search := range map[string]func(string, int) ([]retrieval.Hit, error){"Search": ix.Search, "SearchBleve": ix.SearchBleve} {
			got, err := search(q, 3)
			if err != nil || got == nil || len(got) != 0 {
				t.Errorf("%s(%q) = %v, %v; want empty slice, nil", name, q, got, err)
			}
		}
	}
}

func TestDoc(t *testing.T) {
	ix, err := NewMemory(toyChunks(), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for _, want := range toyChunks() {
		got, ok := ix.Doc(want.ID)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("Doc(%q) = %+v, %v; want %+v", want.ID, got, ok, want)
		}
	}
	if _, ok := ix.Doc("c9"); ok {
		t.Error("Doc(c9) found a chunk that was never indexed")
	}
	if ix.Count() != 4 {
		t.Errorf("Count = %d, want 4", ix.Count())
	}
}

// synthChunks makes n chunks over a small vocabulary, deterministic.
func synthChunks(n, words int) []data.Chunk {
	vocab := []string{"carcinoma", "HER2+", "BI-RADS", "70%", "coloração", "lâmina", "parafina",
		"hematoxilina", "eosina", "5mL", "pH", "≥10", "5,5", "fixação", "formol", "biópsia",
		"mama", "próstata", "corte", "micrótomo", "inclusão", "tecido", "núcleo", "citoplasma"}
	cs := make([]data.Chunk, n)
	x := uint32(12345)
	for i := range cs {
		var b strings.Builder
		for w := 0; w < words; w++ {
			x = x*1664525 + 1013904223 // LCG (Numerical Recipes)
			r := int(x>>8) % (len(vocab) * len(vocab))
			// squared index ~ skewed term frequencies
			b.WriteString(vocab[int(math.Sqrt(float64(r)))])
			b.WriteByte(' ')
			if x%7 == 0 {
				b.WriteString("termo")
				b.WriteString(string(rune('a' + x%26)))
				b.WriteString(string(rune('a' + (x/26)%26)))
				b.WriteByte(' ')
			}
		}
		cs[i] = data.Chunk{ID: "s" + itoa(i), DocID: "doc" + itoa(i/10), Index: i % 10, Text: b.String(), End: b.Len()}
	}
	return cs
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var d []byte
	for ; i > 0; i /= 10 {
		d = append([]byte{byte('0' + i%10)}, d...)
	}
	return string(d)
}

func TestPersistence(t *testing.T) {
	chunks := synthChunks(2*BatchSize+500, 20)
	chunks = append(chunks, toyChunks()...)
	dir := filepath.Join(t.TempDir(), "bm25")
	cfg := RankBM25Config()
	var calls [][2]int
	ix, err := Build(dir, chunks, cfg, func(done, total int) { calls = append(calls, [2]int{done, total}) })
	if err != nil {
		t.Fatal(err)
	}
	n := len(chunks)
	if want := [][2]int{{1000, n}, {2000, n}, {n, n}}; !reflect.DeepEqual(calls, want) {
		t.Errorf("progress calls %v, want %v", calls, want)
	}
	queries := []string{"HER2+ carcinoma", "coloracao lâmina ≥10", "5,5 pH termoab", "BI-RADS 4 lesão"}
	before := map[string][]retrieval.Hit{}
	for _, q := range queries {
		if before[q], err = ix.Search(q, 7); err != nil {
			t.Fatal(err)
		}
		if len(before[q]) == 0 {
			t.Fatalf("query %q: no hits", q)
		}
	}
	avg := ix.AvgDocLen()
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, MetaFile)); err != nil {
		t.Fatal(err)
	}

	re, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if !re.Config().Equal(cfg) || re.Count() != n || re.AvgDocLen() != avg {
		t.Errorf("reopened: config %+v count %d avgdl %v; want %+v %d %v", re.Config(), re.Count(), re.AvgDocLen(), cfg, n, avg)
	}
	mem, err := NewMemory(chunks, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	for _, q := range queries {
		got, err := re.Search(q, 7)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, before[q]) {
			t.Errorf("query %q after reopen:\n got %v\nwant %v", q, got, before[q])
		}
		m, err := mem.Search(q, 7)
		if err != nil {
			t.Fatal(err)
		}
		hitsClose(t, "memory vs disk "+q, m, got, 1e-12)
	}
	want := toyChunks()[2]
	if got, ok := re.Doc(want.ID); !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("reopened Doc(%q) = %+v, %v", want.ID, got, ok)
	}
}

func TestBuildErrors(t *testing.T) {
	dir := t.TempDir()
	dup := append(toyChunks(), data.Chunk{ID: "c2", Text: "x"})
	noID := append(toyChunks(), data.Chunk{Text: "x"})
	for _, tc := range []struct {
		name   string
		dir    string
		chunks []data.Chunk
		cfg    Config
		want   string
	}{
		{"repeated id", filepath.Join(dir, "a"), dup, DefaultConfig(), `chunk 4: field "ID": "c2" repeats chunk 1`},
		{"empty id", filepath.Join(dir, "b"), noID, DefaultConfig(), `chunk 4: field "ID": empty`},
		{"negative k1", filepath.Join(dir, "c"), toyChunks(), Config{K1: -1, B: 0.75}, `field "K1"`},
		{"b above 1", filepath.Join(dir, "d"), toyChunks(), Config{K1: 1.2, B: 1.5}, `field "B"`},
		{"unknown analyzer", filepath.Join(dir, "e"), toyChunks(), Config{K1: 1.2, B: 0.75, Analyzer: "klingon"}, `field "Analyzer"`},
		{"existing dir", dir, toyChunks(), DefaultConfig(), "exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix, err := Build(tc.dir, tc.chunks, tc.cfg, nil)
			if err == nil {
				ix.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if tc.dir != dir {
				if _, serr := os.Stat(tc.dir); !os.IsNotExist(serr) {
					t.Errorf("failed Build left %s behind", tc.dir)
				}
			}
		})
	}
	if _, err := NewMemory(dup, DefaultConfig()); err == nil {
		t.Error("NewMemory with repeated ids: no error")
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Open of a missing dir: no error")
	}
	dir := filepath.Join(t.TempDir(), "ix")
	ix, err := Build(dir, toyChunks(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
	meta := filepath.Join(dir, MetaFile)
	orig, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"format", `"ragforge-bm25/2"`, `"other/9"`, `field "format"`},
		{"docs", `"docs": 4`, `"docs": 5`, `field "docs": 5, but the index holds 4`},
		{"analyzer", `"analyzer": "biomed"`, `"analyzer": "xx"`, `field "Analyzer"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(string(orig), tc.from, tc.to, 1)
			if bad == string(orig) {
				t.Fatalf("%s does not contain %s:\n%s", MetaFile, tc.from, orig)
			}
			if err := os.WriteFile(meta, []byte(bad), 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(meta, orig, 0o644)
			ix, err := Open(dir)
			if err == nil {
				ix.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
	if ix, err := Open(dir); err != nil {
		t.Errorf("Open after restoring %s: %v", MetaFile, err)
	} else {
		ix.Close()
	}
}

func TestEmptyIndex(t *testing.T) {
	ix, err := NewMemory(nil, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	got, err := ix.Search("carcinoma", 5)
	if err != nil || got == nil || len(got) != 0 || ix.Count() != 0 || ix.AvgDocLen() != 0 {
		t.Errorf("empty index: Search = %v, %v; Count %d; AvgDocLen %v", got, err, ix.Count(), ix.AvgDocLen())
	}
}

// TestConcurrentSearch runs Search from several goroutines (run with -race);
// each must see the sequential results.
func TestConcurrentSearch(t *testing.T) {
	ix, err := NewMemory(synthChunks(300, 20), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	queries := []string{"carcinoma HER2+", "lâmina 5,5", "termoab pH ≥10", "biópsia mama"}
	want := make([][]retrieval.Hit, len(queries))
	for i, q := range queries {
		if want[i], err = ix.Search(q, 5); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for r := 0; r < 20; r++ {
				i := (g + r) % len(queries)
				got, err := ix.Search(queries[i], 5)
				if err == nil && !reflect.DeepEqual(got, want[i]) {
					err = errors.New("query " + queries[i] + ": results differ from the sequential run")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
