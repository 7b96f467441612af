package hyde

import (
	"math"
	"strings"
	"testing"
)

func close32(a, b []float32, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i])-float64(b[i])) > tol {
			return false
		}
	}
	return true
}

func TestFuseByHand(t *testing.T) {
	q := []float32{3, 0, 0}
	docs := [][]float32{{0, 3, 0}, {0, 0, 6}}
	// Fusion (Eq. 10–11): (q + d1 + d2)/3 = (1, 1, 2); ‖·‖ = √6.
	// Doc only: (d1 + d2)/2 = (0, 1.5, 3); ‖·‖ = √11.25.
	s6, s1125 := float32(math.Sqrt(6)), float32(math.Sqrt(11.25))
	for _, c := range []struct {
		name      string
		mode      Mode
		normalize bool
		want      []float32
	}{
		{"fusion", ModeFusion, false, []float32{1, 1, 2}},
		{"fusion default mode", "", false, []float32{1, 1, 2}},
		{"fusion normalized", ModeFusion, true, []float32{1 / s6, 1 / s6, 2 / s6}},
		{"doc only", ModeDocOnly, false, []float32{0, 1.5, 3}},
		{"doc only normalized", ModeDocOnly, true, []float32{0, 1.5 / s1125, 3 / s1125}},
		{"concat returns q", ModeConcat, false, []float32{3, 0, 0}},
		{"concat normalized", ModeConcat, true, []float32{1, 0, 0}},
	} {
		got, err := Fuse(q, docs, c.mode, c.normalize)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !close32(got, c.want, 1e-6) {
			t.Errorf("%s: Fuse = %v, want %v", c.name, got, c.want)
		}
	}
	if q[0] != 3 || docs[1][2] != 6 {
		t.Error("Fuse modified its inputs")
	}
	// N = 0 hypothetical documents: fusion is e(q) itself.
	if got, _ := Fuse(q, nil, ModeFusion, false); !close32(got, q, 0) {
		t.Errorf("fusion without documents = %v, want q", got)
	}
}

func TestFuseErrors(t *testing.T) {
	for name, f := range map[string]func() ([]float32, error){
		"bad mode":          func() ([]float32, error) { return Fuse([]float32{1}, nil, "max", false) },
		"dim mismatch":      func() ([]float32, error) { return Fuse([]float32{1, 2}, [][]float32{{1}}, ModeFusion, false) },
		"doc only, no docs": func() ([]float32, error) { return Fuse([]float32{1}, nil, ModeDocOnly, false) },
		"doc only, dim":     func() ([]float32, error) { return Fuse([]float32{1}, [][]float32{{1, 2}}, ModeDocOnly, false) },
	} {
		if _, err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// bagEncoder embeds a text as the counts of the letters a, b, c (queries
// and documents alike), recording the calls.
type bagEncoder struct{ queries, docs []string }

func bag(s string) []float32 {
	return []float32{float32(strings.Count(s, "a")), float32(strings.Count(s, "b")), float32(strings.Count(s, "c"))}
}
func (e *bagEncoder) EncodeQueries(ts []string) ([][]float32, error) {
	e.queries = append(e.queries, ts...)
	out := make([][]float32, len(ts))
	for i, s := range ts {
		out[i] = bag(s)
	}
	return out, nil
}
func (e *bagEncoder) EncodeDocs(ts []string) ([][]float32, error) {
	e.docs = append(e.docs, ts...)
	out := make([][]float32, len(ts))
	for i, s := range ts {
		out[i] = bag(s)
	}
	return out, nil
}
func (e *bagEncoder) Dim() int     { return 3 }
func (e *bagEncoder) Name() string { return "bag" }

func TestEncodeModes(t *testing.T) {
	hypos := []string{"bbb", "cc", "ignored beyond N"}
	for _, c := range []struct {
		mode           Mode
		want           []float32
		queries, nDocs int
	}{
		{ModeFusion, []float32{2.0 / 3, 1, 2.0 / 3}, 1, 2}, // (bag("aa") + bag("bbb") + bag("cc")) / 3 = ((2,0,0)+(0,3,0)+(0,0,2))/3
		{ModeDocOnly, []float32{0, 1.5, 1}, 0, 2},          // (bag("bbb") + bag("cc")) / 2
		{ModeConcat, []float32{2, 3, 2}, 1, 0},             // bag("aa bbb cc")
	} {
		enc := &bagEncoder{}
		got, err := Encode(enc, Config{Mode: c.mode, N: 2}, "aa", hypos)
		if err != nil {
			t.Fatal(err)
		}
		if !close32(got, c.want, 1e-6) {
			t.Errorf("%s: Encode = %v, want %v", c.mode, got, c.want)
		}
		if len(enc.queries) != c.queries || len(enc.docs) != c.nDocs {
			t.Errorf("%s: %d query and %d document encodings, want %d and %d", c.mode, len(enc.queries), len(enc.docs), c.queries, c.nDocs)
		}
		if c.mode == ModeConcat && enc.queries[0] != "aa bbb cc" {
			t.Errorf("concat text %q, want %q", enc.queries[0], "aa bbb cc")
		}
	}
}

// EncodeBatch gives each query the vector Encode gives it alone, with one
// query call and one document call for the whole batch; a document-only
// query without documents falls back to its own embedding.
func TestEncodeBatch(t *testing.T) {
	queries := []string{"aa", "b", "ccc"}
	hypos := [][]string{{"bbb", "cc", "dropped"}, nil, {"a"}}
	for _, mode := range []Mode{ModeFusion, ModeDocOnly, ModeConcat} {
		cfg := Config{Mode: mode, N: 2, Normalize: true}
		enc := &bagEncoder{}
		got, err := EncodeBatch(enc, cfg, queries, hypos)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		calls := len(enc.queries) + len(enc.docs)
		for i, q := range queries {
			want, err := Encode(&bagEncoder{}, cfg, q, hypos[i])
			if err != nil {
				t.Fatalf("%s: query %d: %v", mode, i, err)
			}
			if !close32(got[i], want, 1e-6) {
				t.Errorf("%s: query %d: batch %v, alone %v", mode, i, got[i], want)
			}
		}
		if mode == ModeDocOnly {
			if !close32(got[1], []float32{0, 1, 0}, 1e-6) {
				t.Errorf("doc only without documents: %v, want the query's own (normalised) vector", got[1])
			}
			if len(enc.queries) != 1 || enc.queries[0] != "b" || len(enc.docs) != 3 {
				t.Errorf("doc only: encoded queries %q, docs %q", enc.queries, enc.docs)
			}
		}
		if calls == 0 {
			t.Errorf("%s: nothing encoded", mode)
		}
	}
	if _, err := EncodeBatch(&bagEncoder{}, DefaultConfig(), queries, hypos[:1]); err == nil {
		t.Error("mismatched lengths: no error")
	}
}
