package selflearn

import "github.com/ragforge/ragforge/train/trainer"

// Recipe is the set of settings a recipe fixes; other Config fields keep
// their values, and explicit command-line flags override the recipe's.
type Recipe struct {
	Name           string
	RetrieverLR    float64
	RetrieverBatch int
	Epochs         int
	WarmupRatio    float64
	FusionHoldout  float64
}

// Recipes: pretrained = DefaultConfig (SL-HyDE: lr 1e-5, batch 32, 1 epoch,
// warmup 0.1; the AP paper's fixed hybrid weights); scratch = the values
// chosen by the sweep recorded in docs/recipes.md (tiny BERT, ICT
// generator), with a fifth of the pseudo-queries held out to choose the
// hybrid's weights.
var Recipes = map[string]Recipe{
	trainer.RecipePretrained: {Name: trainer.RecipePretrained, RetrieverLR: 1e-5, RetrieverBatch: 32, Epochs: 1, WarmupRatio: 0.1, FusionHoldout: 0},
	trainer.RecipeScratch:    {Name: trainer.RecipeScratch, RetrieverLR: 2e-4, RetrieverBatch: 16, Epochs: 8, WarmupRatio: 0.1, FusionHoldout: 0.2},
}

// LookupRecipe returns the named recipe (trainer.RecipePretrained or
// trainer.RecipeScratch); an unknown name is an error.
func LookupRecipe(name string) (Recipe, error) { return trainer.LookupRecipe(Recipes, name) }

// Apply sets the recipe's fields of c.
func (r Recipe) Apply(c *Config) {
	c.RetrieverLR, c.RetrieverBatch, c.Epochs, c.WarmupRatio, c.FusionHoldout = r.RetrieverLR, r.RetrieverBatch, r.Epochs, r.WarmupRatio, r.FusionHoldout
}
