package retriever

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
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
		negs, st, err := MineHardNegatives(idx, vecs, pos, docOf, cfg)
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
	negs, _, err := MineHardNegatives(idx, vecs, pos, docOf, cfg)
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
		negs, _, err := MineHardNegatives(idx, [][]float32{{0}}, []string{"d0#0"}, docOf, MineConfig{RankFrom: 10, RankTo: 20, N: 5, Seed: uint64(s)})
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
	a, _, _ := MineHardNegatives(idx, [][]float32{{0}}, []string{"d0#0"}, docOf, DefaultMineConfig())
	b, _, _ := MineHardNegatives(idx, [][]float32{{0}}, []string{"d0#0"}, docOf, DefaultMineConfig())
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
		if _, _, err := MineHardNegatives(idx, [][]float32{{0}}, []string{"a#0"}, docOf, c); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, _, err := MineHardNegatives(idx, [][]float32{{0}}, nil, docOf, DefaultMineConfig()); err == nil {
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
