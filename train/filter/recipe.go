package filter

import "github.com/ragforge/ragforge/train/trainer"

// Recipe is the set of training settings a recipe fixes; every other
// Config field keeps its value. Explicit command-line flags override a
// recipe's values.
type Recipe struct {
	Name         string
	LearningRate float64
	WarmupRatio  float64
	Epochs       int
	BatchSize    int
	Dropout      float64 // < 0: the checkpoint's dropout_rate
}

// Recipes: pretrained = DefaultConfig (RAG²'s launch script
// run_large_train_xl_000.sh: lr 3e-5, batch 16, 40 epochs, no warmup,
// the checkpoint's dropout 0.1); scratch = the values chosen by the sweep
// recorded in docs/recipes.md (tiny T5 on the demo's evidence labels).
var Recipes = map[string]Recipe{
	trainer.RecipePretrained: {Name: trainer.RecipePretrained, LearningRate: 3e-5, WarmupRatio: 0, Epochs: 40, BatchSize: 16, Dropout: -1},
	trainer.RecipeScratch:    {Name: trainer.RecipeScratch, LearningRate: 1e-3, WarmupRatio: 0.1, Epochs: 3, BatchSize: 8, Dropout: 0},
}

// LookupRecipe returns the named recipe (trainer.RecipePretrained or
// trainer.RecipeScratch); an unknown name is an error.
func LookupRecipe(name string) (Recipe, error) { return trainer.LookupRecipe(Recipes, name) }

// Apply sets the recipe's fields of c.
func (r Recipe) Apply(c *Config) {
	c.LearningRate, c.WarmupRatio, c.Epochs, c.BatchSize, c.Dropout = r.LearningRate, r.WarmupRatio, r.Epochs, r.BatchSize, r.Dropout
}
