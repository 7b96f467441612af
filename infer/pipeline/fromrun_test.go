package pipeline

import (
	"strings"
	"testing"

	"github.com/ragforge/ragforge/retrieval/evalrun"
	"github.com/ragforge/ragforge/retrieval/search"
)

// applyTo serves what was evaluated: a setting given that disagrees with
// the run is refused, one not given takes the run's.
func TestEvaluatedApplyTo(t *testing.T) {
	evaluated := func() *Evaluated {
		c := evalrun.DefaultConfig("corpus.jsonl", "qa.csv")
		c.Ks, c.Depth, c.Corpus.ChunkSize, c.Corpus.Overlap = "1,3", 50, 300, 50
		c.Retriever.Mode, c.Retriever.Encoder = search.Hybrid, "enc"
		return &Evaluated{RunID: "r1", Config: c, Ks: []int{1, 3}, DenseWeight: 0.4, BM25Weight: 0.6}
	}
	given := func(names ...string) func(string) bool {
		return func(n string) bool { return strings.Contains(","+strings.Join(names, ",")+",", ","+n+",") }
	}
	for _, tc := range []struct {
		name string
		ev   func(e *Evaluated)
		cfg  func(c *BuildConfig)
		want string // error substring; "" = applies
	}{
		{"nothing given", nil, nil, ""},
		{"same value given", nil, func(c *BuildConfig) { c.Chunk.ChunkSize, c.Given = 300, given("chunk-size") }, ""},
		{"k among the cutoffs", nil, func(c *BuildConfig) { c.K, c.Given = 1, given("k") }, ""},
		{"k not evaluated", nil, func(c *BuildConfig) { c.K, c.Given = 2, given("k") }, "--k 2: run r1 evaluated k [1 3]"},
		{"chunk size differs", nil, func(c *BuildConfig) { c.Chunk.ChunkSize, c.Given = 100, given("chunk-size") }, "--chunk-size 100: run r1 evaluated 300"},
		{"mode differs", nil, func(c *BuildConfig) { c.Mode, c.Given = "bm25", given("mode") }, "--mode bm25: run r1 evaluated hybrid"},
		{"bm25 differs", nil, func(c *BuildConfig) { c.BM25.Preset, c.Given = "rank_bm25", given("bm25-preset") }, "--bm25-preset: BM25"},
		{"union", func(e *Evaluated) { e.Config.Retriever.Union = true }, nil, "evaluated with --union"},
		{"pseudo-queries", func(e *Evaluated) { e.Config.Pseudo = "ict" }, nil, "evaluated on --pseudo-queries ict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := evaluated()
			if tc.ev != nil {
				tc.ev(ev)
			}
			c := DefaultBuildConfig("out", "corpus.jsonl")
			if tc.cfg != nil {
				tc.cfg(&c)
			}
			man := DefaultManifest()
			err := ev.applyTo(&c, &man)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("applyTo = %v, want an error with %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantK := 3
			if c.Given != nil && c.Given("k") {
				wantK = c.K
			}
			r := man.Retrieval
			if c.Mode != "hybrid" || c.Retriever != "enc" || c.Chunk.ChunkSize != 300 || c.Chunk.Overlap != 50 || c.K != wantK ||
				man.FromRun != "r1" || r.DenseWeight != 0.4 || r.BM25Weight != 0.6 || r.Depth != search.DefaultDepth {
				t.Errorf("applied: mode %s retriever %s chunks %d/%d k %d; manifest from %s weights %v/%v depth %d",
					c.Mode, c.Retriever, c.Chunk.ChunkSize, c.Chunk.Overlap, c.K, man.FromRun, r.DenseWeight, r.BM25Weight, r.Depth)
			}
		})
	}
}
