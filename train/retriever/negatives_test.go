package retriever

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/retrieval"
)

// fakeIndex returns a fixed ranking per query (the query vector, of
// dimension 1, selects the ranking), with descending scores; it counts its
// calls.
type fakeIndex struct {
	rankings [][]string
	calls    int
}

func (f *fakeIndex) Dim() int { return 1 }
func (f *fakeIndex) Search(v []float32, k int) ([][]retrieval.Hit, error) {
	f.calls++
	out := make([][]retrieval.Hit, len(v))
	for q, x := range v {
		r := f.rankings[int(x)]
		hits := make([]retrieval.Hit, 0, k)
		for i, id := range r[:min(k, len(r))] {
			hits = append(hits, retrieval.Hit{ID: id, Score: float64(len(r) - i)})
		}
		out[q] = hits
	}
	return out, nil
}

func docOf(id string) string { return id[:strings.IndexByte(id, '#')] }

// Property: over random rankings, mined negatives come from ranks
// [from, to), are distinct, never the positive nor a chunk of its document,
// and number min(n, eligible); shortfalls are counted.
func TestMineHardNegativesProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := 0; trial < 200; trial++ {
		nDocs, chunksPer := 2+rng.IntN(30), 1+rng.IntN(4)
		var all []string
		for d := 0; d < nDocs; d++ {
			for c := 0; c < chunksPer; c++ {
				all = append(all, fmt.Sprintf("d%d#%d", d, c))
			}
		}
		nq := 1 + rng.IntN(4)
		idx := &fakeIndex{}
		vecs := make([][]float32, nq)
		pos := make([]string, nq)
		for q := 0; q < nq; q++ {
			r := append([]string(nil), all...)
			rng.Shuffle(len(r), func(i, j int) { r[i], r[j] = r[j], r[i] })
			idx.rankings = append(idx.rankings, r)
			vecs[q] = []float32{float32(q)}
			pos[q] = all[rng.IntN(len(all))]
		}
		cfg := MineConfig{RankFrom: rng.IntN(5), N: 1 + rng.IntN(8), Seed: uint64(trial)}
		cfg.RankTo = cfg.RankFrom + 1 + rng.IntN(20)
		negs, st, err := MineHardNegatives(idx, MineQueries{Vecs: vecs, Positives: pos}, MineCorpus{DocOf: docOf}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		short := 0
		for q := range negs {
			r := idx.rankings[q]
			rank := map[string]int{}
			for i, id := range r {
				rank[id] = i
			}
			eligible := 0
			for i := cfg.RankFrom; i < min(cfg.RankTo, len(r)); i++ {
				if docOf(r[i]) != docOf(pos[q]) {
					eligible++
				}
			}
			if want := min(cfg.N, eligible); len(negs[q]) != want {
				t.Fatalf("trial %d query %d: %d negatives, want %d", trial, q, len(negs[q]), want)
			}
			if len(negs[q]) < cfg.N {
				short++
			}
			seen := map[string]bool{}
			for _, id := range negs[q] {
				if id == pos[q] || docOf(id) == docOf(pos[q]) {
					t.Fatalf("trial %d query %d: negative %s is the positive %s or of its document", trial, q, id, pos[q])
				}
				if seen[id] {
					t.Fatalf("trial %d query %d: negative %s repeated", trial, q, id)
				}
				seen[id] = true
				if rk := rank[id]; rk < cfg.RankFrom || rk >= cfg.RankTo {
					t.Fatalf("trial %d query %d: negative %s at rank %d outside [%d,%d)", trial, q, id, rk, cfg.RankFrom, cfg.RankTo)
				}
			}
		}
		if st.Shortfall != short || st.Queries != nq {
			t.Fatalf("trial %d: stats %+v, want shortfall %d of %d", trial, st, short, nq)
		}
		if idx.calls != 1 {
			t.Fatalf("trial %d: %d index calls for %d queries, want 1", trial, idx.calls, nq)
		}
	}
}

// Queries are searched in blocks of mineBlock: query i of a later block
// still gets negatives from its own ranking.
func TestMineHardNegativesBlocks(t *testing.T) {
	var rankings [][]string
	for r := 0; r < 3; r++ {
		var ids []string
		for d := 0; d < 30; d++ {
			ids = append(ids, fmt.Sprintf("d%d#0", (d*(r+1)*7)%30))
		}
		rankings = append(rankings, ids)
	}
	idx := &fakeIndex{rankings: rankings}
	nq := 2*mineBlock + 3
	vecs := make([][]float32, nq)
	pos := make([]string, nq)
	for i := range vecs {
		vecs[i] = []float32{float32(i % 3)}
		pos[i] = rankings[i%3][0]
	}
	cfg := MineConfig{RankFrom: 10, RankTo: 20, N: 4, Seed: 1}
	negs, _, err := MineHardNegatives(idx, MineQueries{Vecs: vecs, Positives: pos}, MineCorpus{DocOf: docOf}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if idx.calls != 3 {
		t.Errorf("%d index calls for %d queries, want 3", idx.calls, nq)
	}
	for i, ns := range negs {
		window := map[string]bool{}
		for _, id := range rankings[i%3][cfg.RankFrom:cfg.RankTo] {
			window[id] = true
		}
		if len(ns) != cfg.N {
			t.Fatalf("query %d: %d negatives, want %d", i, len(ns), cfg.N)
		}
		for _, id := range ns {
			if !window[id] {
				t.Fatalf("query %d: negative %s outside ranks [10,20) of ranking %d", i, id, i%3)
			}
		}
	}
}

// Sampling is uniform: over many seeds each eligible candidate is drawn
// about n/eligible of the time, and one seed is deterministic.
func TestMineHardNegativesUniform(t *testing.T) {
	var r []string
	for i := 0; i < 20; i++ {
		r = append(r, fmt.Sprintf("d%d#0", i))
	}
	idx := &fakeIndex{rankings: [][]string{r}}
	counts := map[string]int{}
	const trials = 4000
	for s := 0; s < trials; s++ {
		negs, _, err := MineHardNegatives(idx, MineQueries{Vecs: [][]float32{{0}}, Positives: []string{"d0#0"}}, MineCorpus{DocOf: docOf}, MineConfig{RankFrom: 10, RankTo: 20, N: 5, Seed: uint64(s)})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range negs[0] {
			counts[id]++
		}
	}
	// 10 eligible (ranks 10..19), 5 drawn: p = 0.5 each, sd of count ≈ 32.
	for i := 10; i < 20; i++ {
		c := counts[r[i]]
		if c < trials/2-160 || c > trials/2+160 {
			t.Errorf("%s drawn %d times of %d, want ≈ %d", r[i], c, trials, trials/2)
		}
	}
	a, _, _ := MineHardNegatives(idx, MineQueries{Vecs: [][]float32{{0}}, Positives: []string{"d0#0"}}, MineCorpus{DocOf: docOf}, DefaultMineConfig())
	b, _, _ := MineHardNegatives(idx, MineQueries{Vecs: [][]float32{{0}}, Positives: []string{"d0#0"}}, MineCorpus{DocOf: docOf}, DefaultMineConfig())
	if !reflect.DeepEqual(a, b) {
		t.Errorf("same seed, different negatives: %v vs %v", a, b)
	}
}

func TestMineHardNegativesErrors(t *testing.T) {
	idx := &fakeIndex{rankings: [][]string{{"a#0"}}}
	for name, c := range map[string]MineConfig{
		"empty range": {RankFrom: 5, RankTo: 5, N: 1},
		"n zero":      {RankFrom: 0, RankTo: 5, N: 0},
	} {
		if _, _, err := MineHardNegatives(idx, MineQueries{Vecs: [][]float32{{0}}, Positives: []string{"a#0"}}, MineCorpus{DocOf: docOf}, c); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, _, err := MineHardNegatives(idx, MineQueries{Vecs: [][]float32{{0}}, Positives: nil}, MineCorpus{DocOf: docOf}, DefaultMineConfig()); err == nil {
		t.Error("mismatched positives: no error")
	}
}

func TestTripletsJSONLGolden(t *testing.T) {
	ts := []Triplet{
		{Query: "what causes gout?", HypoDocs: []string{"Gout is caused by uric acid <crystals>."}, Pos: "Uric acid deposits.", Negs: []string{"Asthma.", "Eczema."}},
		{Query: "aspirin dose", Pos: "75 mg daily & more"},
	}
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, ts); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "triplets.jsonl.golden")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("WriteJSONL:\n%s\nwant:\n%s", buf.Bytes(), want)
	}
	got, err := ReadJSONL(bytes.NewReader(want), golden)
	if err != nil {
		t.Fatal(err)
	}
	ts[1].Negs = []string{} // written as [] and read back as empty
	if !reflect.DeepEqual(got, ts) {
		t.Errorf("round trip:\n%+v\nwant\n%+v", got, ts)
	}
}

func TestReadJSONL(t *testing.T) {
	got, err := ReadJSONL(strings.NewReader(`{"query":"q","pos":["p1","p2"],"neg":["n"]}`+"\n\n"), "x")
	if err != nil {
		t.Fatal(err)
	}
	want := []Triplet{{Query: "q", Pos: "p1", Negs: []string{"n"}}, {Query: "q", Pos: "p2", Negs: []string{"n"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for _, c := range []struct{ in, want string }{
		{`{"query":"q","pos":["p"]}` + "\n" + `{"query":"","pos":["p"]}`, `line 2: field "query"`},
		{`{"query":"q","pos":[]}`, `line 1: field "pos"`},
		{`{"query":`, `line 1:`},
	} {
		_, err := ReadJSONL(strings.NewReader(c.in), "f.jsonl")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "f.jsonl") {
			t.Errorf("ReadJSONL(%q) error %v, want it to name f.jsonl and %q", c.in, err, c.want)
		}
	}
}

// A candidate whose text equals the positive's or the query's after
// normalization (NFC, case folding, whitespace) is never a negative; the
// score ceiling drops candidates above MaxScore × the positive's score.
func TestMineHardNegativesSameTextAndCeiling(t *testing.T) {
	// Ranking of 20 chunks, one per document; rank r scores 20 − r.
	var ranking []string
	for d := 0; d < 20; d++ {
		ranking = append(ranking, fmt.Sprintf("d%d#0", d))
	}
	texts := map[string]string{}
	for _, id := range ranking {
		texts[id] = "texto próprio de " + id
	}
	pos := "d0#0"
	texts[pos] = "Fixação em formol tamponado."
	texts["d3#0"] = "  fixac\u0327a\u0303o EM\tFORMOL tamponado. " // NFD, case, spaces: the positive again
	texts["d7#0"] = "QUAL o tempo de fixação?"                     // the query itself
	texts["d8#0"] = "Fixação em formol."                           // close to the positive, not equal: kept
	idx := &fakeIndex{rankings: [][]string{ranking}}
	q := MineQueries{Vecs: [][]float32{{0}}, Positives: []string{pos}, Texts: []string{"Qual o tempo de  fixação?"}}
	corpus := MineCorpus{DocOf: docOf, TextOf: func(id string) string { return texts[id] }}
	all := MineConfig{RankFrom: 0, RankTo: 20, N: 20, Seed: 1}

	negs, st, err := MineHardNegatives(idx, q, corpus, all)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, id := range negs[0] {
		got[id] = true
	}
	if got["d3#0"] || got["d7#0"] || got[pos] {
		t.Errorf("negatives %v hold the positive's or the query's text", negs[0])
	}
	if !got["d8#0"] || len(negs[0]) != 17 || st.SameText != 2 {
		t.Errorf("got %d negatives %v (same text %d), want the 17 others with d8#0, 2 excluded", len(negs[0]), negs[0], st.SameText)
	}
	// Without texts nothing is excluded by text.
	if negs, _, _ := MineHardNegatives(idx, MineQueries{Vecs: q.Vecs, Positives: q.Positives}, MineCorpus{DocOf: docOf}, all); len(negs[0]) != 19 {
		t.Errorf("without texts: %d negatives, want 19", len(negs[0]))
	}

	// Ceiling 0.5 × positive score 20 = 10: ranks 1..9 (scores 19..11) are
	// above it and dropped; rank 10 (score 10) is not above it.
	q.PosScores = []float64{20}
	ceil := all
	ceil.MaxScore = 0.5
	negs, st, err = MineHardNegatives(idx, q, corpus, ceil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range negs[0] {
		r := slices.Index(ranking, id)
		if score := float64(20 - r); score > 10 {
			t.Errorf("negative %s scores %v > ceiling 10", id, score)
		}
	}
	// Ranks 10..19 (10 chunks) are under the ceiling, none same-text.
	if len(negs[0]) != 10 || st.AboveMax != 7 {
		t.Errorf("with ceiling: %d negatives %v, %d above max; want 10 and 7 (ranks 1..9 less d3, d7)", len(negs[0]), negs[0], st.AboveMax)
	}

	for name, c := range map[string]struct {
		q   MineQueries
		cfg MineConfig
	}{
		"ceiling without scores": {MineQueries{Vecs: q.Vecs, Positives: q.Positives}, ceil},
		"ceiling above 1":        {q, MineConfig{RankFrom: 0, RankTo: 20, N: 1, MaxScore: 1.5}},
		"negative ceiling":       {q, MineConfig{RankFrom: 0, RankTo: 20, N: 1, MaxScore: -0.1}},
		"texts of other length":  {MineQueries{Vecs: q.Vecs, Positives: q.Positives, Texts: []string{"a", "b"}}, all},
	} {
		if _, _, err := MineHardNegatives(idx, c.q, corpus, c.cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
