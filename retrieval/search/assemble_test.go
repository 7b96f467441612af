package search

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/dense"
)

// Assemble gives, in every mode, the hits of the pipeline built by hand
// from the same parts, reports its stages, and refuses what a mode lacks.
func TestAssembleMatchesHandBuilt(t *testing.T) {
	queries := []Query{{Text: "alpha aa"}, {Text: "beta bc", Hypos: []string{"bbb"}}, {Text: "gamma c"}}
	for _, mode := range Modes {
		cfg := DefaultConfig()
		cfg.Mode, cfg.Depth = mode, 2
		var stages []string
		a := Assembly{Config: cfg, BM25: bm25.DefaultConfig(), Encoder: letterEncoder{}, Factory: "Flat",
			Progress: func(stage string, done, total int) {
				if len(stages) == 0 || stages[len(stages)-1] != stage {
					stages = append(stages, stage)
				}
			}}
		p, release, err := Assemble(testChunks, a)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		want := []string{"bm25 index", "encode"}
		if mode == BM25 {
			want = want[:1]
		}
		if !reflect.DeepEqual(stages, want) {
			t.Errorf("%s: stages %v, want %v", mode, stages, want)
		}
		got, err := p.SearchBatch(context.Background(), queries, 3)
		release()
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		wantHits, err := testPipeline(t, cfg).SearchBatch(context.Background(), queries, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, wantHits) {
			t.Errorf("%s: assembled %v, hand-built %v", mode, got, wantHits)
		}
	}
	for _, tc := range []struct {
		name string
		a    Assembly
		want string
	}{
		{"unknown mode", Assembly{Config: Config{Mode: "sparse"}, BM25: bm25.DefaultConfig()}, "unknown mode"},
		{"dense without encoder", Assembly{Config: Config{Mode: Dense}, BM25: bm25.DefaultConfig(), Factory: "Flat"}, "needs an encoder"},
		{"nprobe on a flat index", Assembly{Config: Config{Mode: Dense}, BM25: bm25.DefaultConfig(), Encoder: letterEncoder{}, Factory: "Flat",
			Search: dense.SearchParams{Nprobe: -1}}, "faiss Flat"},
	} {
		if _, _, err := Assemble(testChunks, tc.a); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
