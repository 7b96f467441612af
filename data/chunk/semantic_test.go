package chunk

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
)

// countEmbedder embeds a text as the counts of the words "cats", "dogs" and
// "fish" (case-insensitive, punctuation ignored).
type countEmbedder struct{ calls int }

func (e *countEmbedder) EncodeDocs(texts []string) ([][]float32, error) {
	e.calls++
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 3)
		for _, w := range strings.Fields(strings.ToLower(t)) {
			switch strings.Trim(w, ".") {
			case "cats":
				v[0]++
			case "dogs":
				v[1]++
			case "fish":
				v[2]++
			}
		}
		out[i] = v
	}
	return out, nil
}

const animals = "Cats purr. Cats nap. Dogs bark. Dogs run. Fish swim."

func TestPercentileNumpy(t *testing.T) {
	cases := []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{[]float64{0, 1, 0, 1}, 95, 1},   // pos 2.85 between 1 and 1
		{[]float64{0, 1, 0, 1}, 50, 0.5}, // pos 1.5 between 0 and 1
		{[]float64{3, 1, 2}, 25, 1.5},    // pos 0.5
		{[]float64{5}, 95, 5},            // single value
		{[]float64{0, 10, 20, 30, 40}, 100, 40},
	}
	for _, c := range cases {
		if got := Percentile(c.xs, c.p); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.xs, c.p, got, c.want)
		}
	}
}

func TestSplitSemanticGolden(t *testing.T) {
	cases := []struct {
		name  string
		cfg   SemanticConfig
		trace string
	}{
		{"semantic_buffer0_p50", SemanticConfig{Percentile: 50, BufferSize: -1, MinSize: 1, MaxSize: 100},
			`vectors c,c,d,d,f one-hot: d = [0,1,0,1]; 50th pct = 0.5; breaks after s1 and s3`},
		{"semantic_buffer1_p50", SemanticConfig{Percentile: 50, BufferSize: 1, MinSize: 1, MaxSize: 100},
			`buffered counts [2,0,0] [2,1,0] [1,2,0] [0,2,1] [0,1,1]: d = 1-2/√5=.1056, .2, .2, 1-3/√10=.0513; pct50 = (.1056+.2)/2 = .1528; breaks after s1, s2`},
		{"semantic_minsize", SemanticConfig{Percentile: 50, BufferSize: -1, MinSize: 5, MaxSize: 100},
			`breaks after s1 ("Cats purr. Cats nap." = 4 words < 5: ignored) and s3 (8 words: kept)`},
		{"semantic_maxsize_fallback", SemanticConfig{Percentile: 50, BufferSize: -1, MinSize: 1, MaxSize: 3},
			`groups as buffer0 (4, 4, 2 words); 4 > 3 -> recursive split on " " by words: "Cats purr. Cats" (3), "nap."`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := readPieces(t, tc.name+".golden")
			got, _, err := SplitSemantic(animals, &countEmbedder{}, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("trace: %s\ngot  %+v\nwant %+v", tc.trace, got, want)
			}
			for _, p := range got {
				if animals[p.Start:p.End] != p.Text {
					t.Errorf("piece %q: span mismatch", p.Text)
				}
			}
		})
	}
}

// With the default 95th percentile, 20 distances of which one is 1 and the
// rest 0 give a threshold of 0.05 (pos 18.05), so exactly one break.
func TestSplitSemanticDefaultPercentile(t *testing.T) {
	text := strings.Repeat("Cats purr. ", 11) + strings.Repeat("Dogs bark. ", 10)
	cfg := DefaultSemanticConfig()
	cfg.MinSize, cfg.BufferSize = -1, -1
	got, st, err := SplitSemantic(text, &countEmbedder{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.Sentences != 21 || math.Abs(st.Threshold-0.05) > 1e-12 || st.Breakpoints != 1 || len(got) != 2 {
		t.Fatalf("stats %+v, %d pieces", st, len(got))
	}
	if got[0].Text != strings.TrimSpace(strings.Repeat("Cats purr. ", 11)) {
		t.Errorf("first chunk %q", got[0].Text)
	}
}

type badEmbedder struct{ n, dim int }

func (b badEmbedder) EncodeDocs(texts []string) ([][]float32, error) {
	if b.n < 0 {
		return nil, errors.New("boom")
	}
	out := make([][]float32, b.n)
	for i := range out {
		out[i] = make([]float32, b.dim+i)
	}
	return out, nil
}

func TestSplitSemanticErrors(t *testing.T) {
	ok := SemanticConfig{Percentile: 50, MinSize: 1, MaxSize: 10}
	cases := []struct {
		name string
		emb  Embedder
		cfg  SemanticConfig
		want string
	}{
		{"embedder error", badEmbedder{n: -1}, ok, "boom"},
		{"count mismatch", badEmbedder{n: 2, dim: 3}, ok, "returned 2 vectors for 5"},
		{"dim mismatch", badEmbedder{n: 5, dim: 3}, ok, "dim"},
		{"percentile", &countEmbedder{}, SemanticConfig{Percentile: 120}, `"Percentile"`},
		{"max < min", &countEmbedder{}, SemanticConfig{MinSize: 10, MaxSize: 5}, `"MaxSize"`},
	}
	for _, tc := range cases {
		_, _, err := SplitSemantic(animals, tc.emb, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestSplitSemanticDoc(t *testing.T) {
	emb := &countEmbedder{}
	doc := data.Document{ID: "d1", Text: "Only one sentence here"}
	chunks, _, err := SplitSemanticDoc(doc, emb, SemanticConfig{MinSize: 1, MaxSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 1 || chunks[0].ID != "d1#0" || chunks[0].Text != "Only one sentence here" || emb.calls != 0 {
		t.Fatalf("chunks %+v, embed calls %d (one sentence needs none)", chunks, emb.calls)
	}
	if _, _, err := SplitSemanticDoc(data.Document{Text: "x"}, emb, SemanticConfig{}); err == nil {
		t.Error("empty id accepted")
	}
}
