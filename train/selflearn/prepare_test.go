package selflearn

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/train/trainer"
)

// Prepare applies the recipe, keeps the fields given explicitly, records
// the recipe's name and validates.
func TestPrepare(t *testing.T) {
	bert := testutil.SharedPath(t, "fixtures/bert-tiny")
	base := DefaultConfig()
	base.RetrieverDir, base.Generator, base.WorkDir = bert, "ict", filepath.Join(t.TempDir(), "work")
	base.RetrieverLR, base.QueriesPerChunk = 7e-4, 3
	scratch, pretrained := Recipes[trainer.RecipeScratch], Recipes[trainer.RecipePretrained]
	for _, c := range []struct {
		name     string
		recipe   string
		explicit []string
		lr       float64
		queries  int
		err      string
	}{
		{"scratch", trainer.RecipeScratch, nil, scratch.RetrieverLR, scratch.QueriesPerChunk, ""},
		{"pretrained", trainer.RecipePretrained, nil, pretrained.RetrieverLR, pretrained.QueriesPerChunk, ""},
		{"explicit lr", trainer.RecipeScratch, []string{"RetrieverLR"}, 7e-4, scratch.QueriesPerChunk, ""},
		{"explicit queries", trainer.RecipePretrained, []string{"QueriesPerChunk"}, pretrained.RetrieverLR, 3, ""},
		{"unknown recipe", "fast", nil, 0, 0, `recipe "fast"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Prepare(base, Settings{Recipe: c.recipe, Explicit: c.explicit}, io.Discard)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Recipe != c.recipe || got.RetrieverLR != c.lr || got.QueriesPerChunk != c.queries {
				t.Errorf("recipe %q lr %g queries %d; want %q %g %d", got.Recipe, got.RetrieverLR, got.QueriesPerChunk, c.recipe, c.lr, c.queries)
			}
			if got.GeneratorLoRA.LearningRate != 0 {
				t.Errorf("ict generator got a LoRA config %+v", got.GeneratorLoRA)
			}
		})
	}
}
