package search

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/retrieval/fusion"
	"github.com/ragforge/ragforge/retrieval/hyde"
)

// letterEncoder embeds a text as its counts of 'a', 'b', 'c' (+1 to avoid zero vectors).
type letterEncoder struct{}

func (letterEncoder) EncodeQueries(ts []string) ([][]float32, error) {
	return letterEncoder{}.EncodeDocs(ts)
}
func (letterEncoder) EncodeDocs(ts []string) ([][]float32, error) {
	out := make([][]float32, len(ts))
	for i, s := range ts {
		out[i] = []float32{1 + float32(strings.Count(s, "a")), 1 + float32(strings.Count(s, "b")), 1 + float32(strings.Count(s, "c"))}
	}
	return out, nil
}
func (letterEncoder) Dim() int     { return 3 }
func (letterEncoder) Name() string { return "letters" }

var testChunks = []data.Chunk{
	{ID: "x#0", DocID: "x", Text: "aaa b alpha"}, {ID: "x#1", DocID: "x", Index: 1, Text: "bbb c beta"},
	{ID: "y", DocID: "y", Text: "ccc a gamma"}, {ID: "z", DocID: "z", Text: "abc abc alpha beta"},
}

func testPipeline(t *testing.T, cfg Config) *Pipeline {
	t.Helper()
	ix, err := IndexChunks(letterEncoder{}, testChunks, "Flat", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Close)
	bm, err := bm25.NewMemory(testChunks, bm25.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bm.Close() })
	return &Pipeline{Config: cfg, BM25: bm, Encoder: letterEncoder{}, Index: ix}
}

// Every mode equals its parts composed by hand, one query at a time and
// in a batch.
func TestModesMatchTheirParts(t *testing.T) {
	queries := []Query{{Text: "alpha aa"}, {Text: "beta bc", Hypos: []string{"bbb"}}, {Text: "gamma c"}}
	for _, mode := range Modes {
		cfg := DefaultConfig()
		cfg.Mode, cfg.Depth = mode, 2
		p := testPipeline(t, cfg)
		batch, err := p.SearchBatch(context.Background(), queries, 3)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		for i, q := range queries {
			var want []retrieval.Hit
			dense := func(v []float32, err error) []retrieval.Hit {
				if err != nil {
					t.Fatal(err)
				}
				h, err := p.Index.Search(v, 3)
				if err != nil {
					t.Fatal(err)
				}
				return h[0]
			}
			qv, _ := letterEncoder{}.EncodeQueries([]string{q.Text})
			switch mode {
			case BM25:
				want, err = p.BM25.Search(q.Text, 3)
			case Dense:
				want = dense(qv[0], nil)
			case Hybrid:
				b, _ := p.BM25.Search(q.Text, 3)
				want, err = fusion.RRF([][]retrieval.Hit{dense(qv[0], nil), b}, []float64{fusion.DenseWeight, fusion.BM25Weight}, 3, fusion.Options{})
			case HyDE:
				want = dense(hyde.Encode(letterEncoder{}, cfg.HyDE, q.Text, q.Hypos))
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(batch[i], want) {
				t.Errorf("%s: query %q: batch %v, parts %v", mode, q.Text, batch[i], want)
			}
			if q.Hypos == nil {
				one, err := p.Search(q.Text, 3)
				if err != nil || !reflect.DeepEqual(one, want) {
					t.Errorf("%s: Search(%q) = %v (%v), want %v", mode, q.Text, one, err, want)
				}
			}
		}
	}
}

func TestHybridDepthAndUnion(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Union = true
	p := testPipeline(t, cfg)
	got, err := p.Search("alpha aa", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 1 || len(got) > 2 {
		t.Errorf("union of two top-1 lists: %v", got)
	}
	p.Union = false
	got, err = p.Search("alpha aa", 1)
	if err != nil || len(got) != 1 {
		t.Errorf("k 1: %v, %v", got, err)
	}
}

type reverse struct{ calls int }

func (r *reverse) Rerank(q string, hits []retrieval.Hit, textOf func(string) (string, bool)) ([]retrieval.Hit, error) {
	r.calls++
	out := make([]retrieval.Hit, len(hits))
	for i, h := range hits {
		if _, ok := textOf(h.ID); !ok {
			panic(h.ID)
		}
		out[len(hits)-1-i] = h
	}
	return out, nil
}

func TestRerank(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode = BM25
	p := testPipeline(t, cfg)
	plain, err := p.Search("alpha", 2)
	if err != nil || len(plain) != 2 {
		t.Fatalf("%v, %v", plain, err)
	}
	rr := &reverse{}
	p.Reranker = rr
	if _, err := p.Search("alpha", 2); err == nil {
		t.Error("reranker without TextOf: no error")
	}
	p.TextOf = func(id string) (string, bool) { return id, true }
	got, err := p.Search("alpha", 2)
	if err != nil || rr.calls != 1 || !reflect.DeepEqual(got, []retrieval.Hit{plain[1], plain[0]}) {
		t.Errorf("reranked %v (%v), plain %v", got, err, plain)
	}
}

func TestValidate(t *testing.T) {
	full := testPipeline(t, DefaultConfig())
	for _, tc := range []struct {
		name string
		p    Pipeline
		err  string
	}{
		{"unknown mode", Pipeline{Config: Config{Mode: "sparse"}, BM25: full.BM25}, "unknown mode"},
		{"bm25 without index", Pipeline{Config: Config{Mode: BM25}}, "needs a BM25 index"},
		{"dense without encoder", Pipeline{Config: Config{Mode: Dense}, Index: full.Index}, "needs an encoder"},
		{"hybrid without bm25", Pipeline{Config: Config{Mode: Hybrid}, Encoder: letterEncoder{}, Index: full.Index}, "mode hybrid needs"},
		{"negative weight", Pipeline{Config: Config{Mode: BM25, DenseWeight: -1}, BM25: full.BM25}, "≥ 0"},
		{"hyde mode", Pipeline{Config: Config{Mode: HyDE, HyDE: hyde.Config{Mode: "sum"}}, Encoder: letterEncoder{}, Index: full.Index}, "HyDE mode"},
	} {
		if err := tc.p.Validate(); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.err)
		}
	}
	if _, err := full.Search("a", 0); err == nil {
		t.Error("k 0: no error")
	}
}

func TestIndexEncodedMatchesIndexChunks(t *testing.T) {
	root := t.TempDir()
	vecs, dim, err := encode.EncodeCorpus(letterEncoder{}, testChunks, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := data.WriteRAG2(root, "c", testChunks, vecs, dim, 3, data.EncodeInfo{}); err != nil {
		t.Fatal(err)
	}
	pre, err := data.OpenEncoded(data.EncodedScheme + root)
	if err != nil {
		t.Fatal(err)
	}
	fly, err := IndexChunks(letterEncoder{}, testChunks, "Flat", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fly.Close()
	stored, err := IndexEncoded(letterEncoder{}, pre, "Flat")
	if err != nil {
		t.Fatal(err)
	}
	defer stored.Close()
	for _, q := range []string{"aa", "bc", "c"} {
		v, _ := letterEncoder{}.EncodeQueries([]string{q})
		a, err1 := fly.Search(v[0], 4)
		b, err2 := stored.Search(v[0], 4)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(a, b) || len(a[0]) != 4 {
			t.Errorf("%q: on the fly %v (%v), stored %v (%v)", q, a, err1, b, err2)
		}
	}
	pre.Dim = 4
	if _, err := IndexEncoded(letterEncoder{}, pre, "Flat"); err == nil || !strings.Contains(err.Error(), "dim 4") {
		t.Errorf("dimension mismatch: err = %v", err)
	}
}

func TestModeCheck(t *testing.T) {
	for _, tc := range []struct {
		mode           Mode
		err            string
		dense, lexical bool
	}{
		{BM25, "", false, true},
		{Dense, "", true, false},
		{Hybrid, "", true, true},
		{HyDE, "", true, false},
		{"", `unknown mode "" (want one of bm25, dense, hybrid, hyde)`, true, false},
		{"BM25", `unknown mode "BM25" (want one of bm25, dense, hybrid, hyde)`, true, false},
	} {
		err := tc.mode.Check()
		if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("Mode(%q).Check() = %v, want %q", tc.mode, err, tc.err)
		}
		if err == nil && (tc.mode.Dense() != tc.dense || tc.mode.Lexical() != tc.lexical) {
			t.Errorf("Mode(%q): Dense %v Lexical %v, want %v %v", tc.mode, tc.mode.Dense(), tc.mode.Lexical(), tc.dense, tc.lexical)
		}
	}
}
