package filtertrain

import (
	"testing"

	"github.com/ragforge/ragforge/train/trainer"
)

// Apply sets every field a recipe fixes and leaves the rest of the Config.
func TestRecipeApply(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		lr, warmup, drop, maxNorm float64
		epochs, batch             int
	}{
		{trainer.RecipePretrained, 3e-5, 0, -1, 0, 40, 16},
		{trainer.RecipeScratch, 3e-3, 0.1, 0, 1, 7, 8},
	} {
		r, err := LookupRecipe(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		c := DefaultConfig()
		c.MaxGradNorm, c.MaxSeqLength = 7, 256
		r.Apply(&c)
		if c.LearningRate != tc.lr || c.WarmupRatio != tc.warmup || c.Dropout != tc.drop || c.MaxGradNorm != tc.maxNorm ||
			c.Epochs != tc.epochs || c.BatchSize != tc.batch {
			t.Errorf("%s: lr %v warmup %v dropout %v clip %v epochs %d batch %d", tc.name, c.LearningRate, c.WarmupRatio, c.Dropout, c.MaxGradNorm, c.Epochs, c.BatchSize)
		}
		if c.MaxSeqLength != 256 {
			t.Errorf("%s: changed MaxSeqLength to %d", tc.name, c.MaxSeqLength)
		}
	}
	if _, err := LookupRecipe("fast"); err == nil {
		t.Error("unknown recipe: no error")
	}
}
